#include "common/compression/top_k_selection.hpp"

#include <doctest/doctest.h>

#include <limits>

#include "test_support.hpp"

using namespace tern::compression;
using namespace tern::compression::testing;

namespace {

std::vector<uint32_t> selectTopK(const std::vector<float>& g, uint32_t k) {
  TopKSelector s;
  std::vector<uint32_t> out;
  s.select(g, k, out);
  return out;
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
