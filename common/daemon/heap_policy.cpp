#include "common/daemon/heap_policy.hpp"

#include <atomic>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tern::daemon {

namespace {
constexpr size_t kGlibcDefaultThreshold = 128 * 1024;
constexpr size_t kLargestHeapBlock = 32u << 20;  // glibc's ceiling for the mmap threshold (64-bit)
constexpr size_t kBuffersKept = 8;  // a round's pushes in flight, the update, the work vectors
}  // namespace

void keepBuffersOf(size_t largest_buffer_bytes) {
  static std::atomic<bool> done{false};
  if (largest_buffer_bytes <= kGlibcDefaultThreshold || done.exchange(true)) return;
#if defined(__GLIBC__)
  // Slack above the buffer for the allocator's header and a message's envelope.
  const size_t block = largest_buffer_bytes + (64u << 10);
  mallopt(M_MMAP_THRESHOLD, int(block < kLargestHeapBlock ? block : kLargestHeapBlock));
  mallopt(M_TRIM_THRESHOLD,
          int(kBuffersKept * (block < kLargestHeapBlock ? block : kLargestHeapBlock)));
#endif
}

}  // namespace tern::daemon
