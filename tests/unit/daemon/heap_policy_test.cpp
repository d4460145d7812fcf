#include "common/daemon/heap_policy.hpp"

#include <doctest/doctest.h>
#include <sys/resource.h>

#include <memory>
#include <vector>

// The sanitizers bring their own allocators, which mallopt does not steer.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kOtherAllocator = true;
#else
constexpr bool kOtherAllocator = false;
#endif

namespace {

long minorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// One round of a coordinator at 1e6 parameters: six model-sized buffers alive at once (pushes,
// the aggregate, the step), written through, then freed. Returns the minor faults of `rounds`.
long faultsOver(int rounds) {
  constexpr size_t kFloats = 1u << 20;
  volatile float sink = 0;
  const long before = minorFaults();
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::unique_ptr<float[]>> buffers;
    for (int b = 0; b < 6; ++b) {
      buffers.emplace_back(new float[kFloats]);
      for (size_t i = 0; i < kFloats; i += 1024) buffers.back()[i] = float(i + r);
    }
    for (auto& b : buffers) sink = sink + b[kFloats - 1024];
  }
  return minorFaults() - before;
}

}  // namespace

TEST_CASE("once told the model's size, a round's model-sized buffers reuse their pages" *
          doctest::skip(kOtherAllocator)) {
  constexpr long kPagesPerRound = 6 * (4l << 20) / 4096;
  faultsOver(2);
  // glibc's defaults: the freed buffers go back to the kernel, each round faults them in again.
  const long untuned = faultsOver(10);
  CHECK(untuned > 10 * kPagesPerRound / 2);
  tern::daemon::keepBuffersOf(4u << 20);
  faultsOver(2);
  const long kept = faultsOver(10);
  CHECK(kept < 10 * kPagesPerRound / 100);  // under 1% of the pages the rounds touch
  MESSAGE("minor faults over 10 rounds: " << untuned << " by default, " << kept << " kept");
}
