#include "common/compression/top_k_selection.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "test_support.hpp"

using namespace tern::compression;
using namespace tern::compression::testing;

namespace {

std::vector<uint32_t> selectTopK(const std::vector<float>& g, uint32_t k, bool allow_avx2 = true) {
  TopKSelector s(allow_avx2);
  std::vector<uint32_t> out;
  std::vector<float> values;
  s.select(g, k, out, values);
  REQUIRE(values.size() == out.size());
  for (size_t i = 0; i < out.size(); ++i)
    REQUIRE(std::bit_cast<uint32_t>(values[i]) == std::bit_cast<uint32_t>(g[out[i]]));
  return out;
}

// Every j with |g[j]| at or above |g[at]|, in increasing order.
std::vector<uint32_t> bruteForceAtLeast(const std::vector<float>& g, float at) {
  std::vector<uint32_t> out;
  for (size_t j = 0; j < g.size(); ++j)
    if (magnitudeKey(g[j]) >= magnitudeKey(at)) out.push_back(uint32_t(j));
  return out;
}

// Gaussian values with a block of large ones (many hits per group) and a region of zeros, so a
// single scan meets dense, sparse and empty spans of groups.
std::vector<float> mixedDensityGradient(size_t d, uint64_t seed) {
  std::vector<float> g = gaussianGradient(d, seed);
  for (size_t j = d / 4; j < d / 4 + d / 8; ++j) g[j] *= 8.0f;
  for (size_t j = d / 2; j < d / 2 + d / 8; ++j) g[j] = 0.0f;
  return g;
}

}  // namespace

TEST_CASE("top-k selection equals a brute-force sort on small gaussian vectors") {
  for (size_t d : {1, 2, 3, 15, 16, 17, 100, 1000}) {
    const auto g = gaussianGradient(d, 11 + d);
    for (size_t k : {size_t(1), size_t(2), d / 3 + 1, d - 1, d}) {
      if (k == 0 || k > d) continue;
      CHECK(selectTopK(g, uint32_t(k)) == bruteForceTopK(g, k));
    }
  }
}

TEST_CASE("top-k selection equals a brute-force sort on large vectors that use sampling") {
  for (size_t d : {65536, 100003, 300000}) {
    const auto g = gaussianGradient(d, d);
    for (size_t k : {1, 7, 100, 3000, 30000})
      CHECK(selectTopK(g, uint32_t(k)) == bruteForceTopK(g, k));
  }
}

TEST_CASE("top-k selection breaks ties towards the lower index") {
  for (size_t d : {50, 70000}) {
    const auto g = tiedGradient(d, 5);
    for (size_t k : {1, 5, 13, 40}) CHECK(selectTopK(g, uint32_t(k)) == bruteForceTopK(g, k));
  }
  std::vector<float> zeros(100000, 0.0f);
  CHECK(selectTopK(zeros, 10) == bruteForceTopK(zeros, 10));
}

TEST_CASE("top-k selection stays exact when the sample misses the large values") {
  // Large magnitudes only in one region the evenly spread sample mostly skips, and a steep
  // scale change across the vector: the estimated threshold is far off, the answer is not.
  std::vector<float> g = gaussianGradient(200000, 3, 1e-3f);
  for (size_t j = 1000; j < 1300; ++j) g[j] = float(j);
  for (size_t j = 150000; j < g.size(); ++j) g[j] *= 1e4f;
  for (size_t k : {10, 250, 400, 5000, 60000})
    CHECK(selectTopK(g, uint32_t(k)) == bruteForceTopK(g, k));
}

TEST_CASE("top-k selection stays exact when the sample sees only the smallest values") {
  // The selector samples runs of 16 at evenly spaced offsets; shrinking every 16-run whose
  // start is a multiple of the sampling stride makes the sample report a tiny k-th key, so
  // nearly every coordinate becomes a candidate and most lie above the sample's upper bound.
  const size_t d = 1 << 18;
  std::vector<float> g = gaussianGradient(d, 21);
  const size_t chunks = 512, stride = (d - 16) / (chunks - 1);
  for (size_t c = 0; c < chunks; ++c)
    for (size_t j = 0; j < 16; ++j) g[c * stride + j] *= 1e-6f;
  for (size_t k : {1, 100, 5000, 100000}) CHECK(selectTopK(g, uint32_t(k)) == bruteForceTopK(g, k));
}

TEST_CASE("top-k selection stays exact on structured gradients") {
  const size_t d = 150000;
  tern::Rng rng(33);
  std::vector<std::vector<float>> cases;
  std::vector<float> layered = gaussianGradient(d, 1);  // per-layer scales, as in a network
  for (size_t j = 0; j < d; ++j) layered[j] *= std::pow(10.0f, float((j / 5000) % 7) - 3.0f);
  cases.push_back(layered);
  std::vector<float> sparse(d, 0.0f);  // mostly zeros, as after ReLU
  for (size_t j = 0; j < d; j += 1 + rng() % 50) sparse[j] = float(int(rng() % 200) - 100);
  cases.push_back(sparse);
  std::vector<float> ramp(d);
  for (size_t j = 0; j < d; ++j) ramp[j] = float(j % 1000) * ((j & 1) ? 1.0f : -1.0f);
  cases.push_back(ramp);
  for (const auto& g : cases)
    for (size_t k : {1, 77, 1500, 20000, 90000})
      CHECK(selectTopK(g, uint32_t(k)) == bruteForceTopK(g, k));
}

TEST_CASE("the AVX2 and baseline scans both select what a brute-force sort selects") {
  std::vector<std::vector<float>> cases;
  for (size_t d : {1, 2, 63, 64, 65, 129, 1000, 40000, 200003}) {
    cases.push_back(gaussianGradient(d, 7 + d));
    cases.push_back(tiedGradient(d, 9 + d));
    cases.push_back(std::vector<float>(d, 0.0f));
  }
  cases.push_back(mixedDensityGradient(300000, 5));
  for (const auto& g : cases) {
    const size_t d = g.size();
    for (size_t k : {size_t(1), size_t(2), d / 1000 + 1, d / 100 + 1, d / 7 + 1, d - 1, d}) {
      if (k == 0 || k > d) continue;
      const auto want = bruteForceTopK(g, k);
      CHECK(selectTopK(g, uint32_t(k), true) == want);
      CHECK(selectTopK(g, uint32_t(k), false) == want);
    }
  }
}

TEST_CASE("the AVX2 and baseline scans both keep exactly the coordinates at or above a key") {
  tern::Rng rng(17);
  for (const auto& g :
       {gaussianGradient(100001, 3), tiedGradient(70001, 4), mixedDensityGradient(250000, 6)}) {
    for (int trial = 0; trial < 6; ++trial) {
      const float at = trial == 0 ? 0.0f : g[rng() % g.size()];
      const auto want = bruteForceAtLeast(g, at);
      for (bool allow_avx2 : {true, false}) {
        TopKSelector s(allow_avx2);
        std::vector<uint32_t> idx;
        std::vector<float> values;
        s.selectAtLeast(g, magnitudeKey(at), idx, values);
        CHECK(idx == want);
        REQUIRE(values.size() == idx.size());
        for (size_t i = 0; i < idx.size(); ++i)
          CHECK(std::bit_cast<uint32_t>(values[i]) == std::bit_cast<uint32_t>(g[idx[i]]));
      }
    }
  }
}

TEST_CASE("top-k selection ranks NaN above every number so callers can reject it") {
  std::vector<float> g{1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f,
                       std::numeric_limits<float>::infinity()};
  CHECK(selectTopK(g, 2) == std::vector<uint32_t>{1, 3});
}

TEST_CASE("top-k selection clamps k to the dimension and returns nothing for k = 0") {
  const auto g = gaussianGradient(10, 1);
  CHECK(selectTopK(g, 0).empty());
  CHECK(selectTopK(g, 50).size() == 10);
}

TEST_CASE("the SSE2, AVX2 and portable group tests agree on every lane") {
  tern::Rng rng(12);
  for (int i = 0; i < 5000; ++i) {
    float group[64];
    for (float& x : group) x = std::bit_cast<float>(uint32_t(rng()));
    if (i % 2)
      for (float& x : group) x = float(int(rng() % 9) - 4);  // small integers, ties
    const uint32_t t = (i % 5 == 0) ? 0u : magnitudeKey(group[rng() % 64]);
    uint64_t want = 0;
    for (unsigned j = 0; j < 64; ++j) want |= uint64_t(magnitudeKey(group[j]) >= t) << j;
    CHECK(detail::groupHitMask(group, t) == want);
    CHECK(detail::groupHitMaskPortable(group, t) == want);
#if defined(__x86_64__) && defined(__GNUC__)
    if (detail::haveAvx2()) CHECK(detail::groupHitMaskAvx2(group, t) == want);
#endif
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
TEST_CASE("the AVX2 path is taken exactly where the kernel reports AVX2, BMI1 and POPCNT") {
  // The CPU flags as the kernel lists them, read apart from the code's own cpuid checks: where
  // they are present the group test above compares the AVX2 path too, not the baseline alone.
  std::ifstream cpuinfo("/proc/cpuinfo");
  REQUIRE(cpuinfo.good());
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string word; words >> word;) flags.insert(word);
      break;
    }
  }
  REQUIRE_FALSE(flags.empty());
  auto has = [&](const char* flag) { return flags.count(flag) > 0; };
  const bool listed = has("avx2") && has("bmi1") && has("popcnt");
  const std::string runs = listed ? "runs" : "does not run";
  MESSAGE("AVX2 group test " << runs << " on this CPU");
  CHECK(detail::haveAvx2() == listed);
}
#endif

TEST_CASE("radix selection returns the same key as sorting") {
  tern::Rng rng(4);
  for (size_t n : {1, 2, 10, 1000, 20000, 100000}) {
    std::vector<uint32_t> keys(n);
    for (int trial = 0; trial < 4; ++trial) {
      for (uint32_t& k : keys)
        k = trial == 0 ? uint32_t(rng() >> 33) : uint32_t(rng() % (trial * 50 + 1)) << (trial * 7);
      std::vector<uint32_t> sorted = keys;
      std::sort(sorted.begin(), sorted.end(), std::greater<uint32_t>());
      for (size_t rank : {size_t(0), n / 3, n - 1}) {
        std::vector<uint32_t> scratch = keys;
        CHECK(detail::kthLargestKey(scratch, rank) == sorted[rank]);
      }
    }
  }
}
