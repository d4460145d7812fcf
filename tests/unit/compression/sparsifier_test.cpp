#include <doctest/doctest.h>

#include <cmath>

#include "common/compression/compressors.hpp"
#include "common/compression/half_float.hpp"
#include "test_support.hpp"

using namespace tern::compression;
using namespace tern::compression::testing;

TEST_CASE("the hard threshold keeps exactly the coordinates with |g_j| >= lambda") {
  std::vector<float> g = gaussianGradient(5000, 2);
  g[10] = 0.75f;  // exactly at the threshold: kept
  g[11] = -0.75f;
  g[12] = std::nextafter(0.75f, 0.0f);  // just below: dropped
  ThresholdCompressor c(0.75);
  tern::Rng rng(1);
  const Compressed out = c.compress(g, 0, rng);
  std::vector<uint32_t> want;
  for (uint32_t j = 0; j < g.size(); ++j)
    if (std::fabs(g[j]) >= 0.75f) want.push_back(j);
  CHECK(out.decoded.indices == want);
  for (size_t i = 0; i < want.size(); ++i) CHECK(out.decoded.values[i] == g[want[i]]);
}

TEST_CASE("a threshold push limited to `level` coordinates keeps the largest of those that pass") {
  // The limit keeps a push within the coordinator's largest message; without one (0), or with
  // one no smaller than the count that passes, every coordinate at or above lambda goes.
  const std::vector<float> g = gaussianGradient(5000, 7);
  const double lambda = 1.0;
  size_t passing = 0;
  for (float x : g) passing += std::fabs(x) >= lambda ? 1 : 0;
  REQUIRE(passing > 500);
  ThresholdCompressor c(lambda);
  tern::Rng rng(1);
  for (uint32_t limit : {0u, 1u, 37u, 500u, uint32_t(passing), uint32_t(passing + 1), 5000u}) {
    CAPTURE(limit);
    const Compressed out = c.compress(g, limit, rng);
    CHECK(c.lastPassed() == passing);
    std::vector<uint32_t> want;
    if (limit == 0 || limit >= passing) {
      for (uint32_t j = 0; j < g.size(); ++j)
        if (std::fabs(g[j]) >= lambda) want.push_back(j);
    } else {
      want = bruteForceTopK(g, limit);
    }
    CHECK(out.decoded.indices == want);
    for (size_t i = 0; i < want.size() && i < out.decoded.values.size(); ++i)
      CHECK(out.decoded.values[i] == g[want[i]]);
    CHECK(out.bytes.size() <= c.encodedBytes(5000, uint32_t(want.size())));
  }
}

TEST_CASE("a threshold that is not a float keeps |g_j| >= lambda in exact arithmetic") {
  const double lambda = 0.1;  // not representable; float(0.1) is above 0.1
  const float below = std::nextafter(float(lambda), 0.0f);
  std::vector<float> g{float(lambda), below, 1.0f};
  ThresholdCompressor c(lambda);
  tern::Rng rng(1);
  const auto idx = c.compress(g, 0, rng).decoded.indices;
  std::vector<uint32_t> want;
  for (uint32_t j = 0; j < g.size(); ++j)
    if (double(g[j]) >= lambda) want.push_back(j);
  CHECK(idx == want);
}

TEST_CASE("a threshold above every magnitude sends an empty message that decodes") {
  ThresholdCompressor c(1e30);
  tern::Rng rng(1);
  const Compressed out = c.compress(gaussianGradient(100, 1), 0, rng);
  CHECK(out.decoded.nonZeros() == 0);
  const DecodeResult r = decode(out.bytes, DecodeLimits{});
  REQUIRE(r.value.has_value());
  CHECK(r.value->indices.empty());
}

TEST_CASE("S+Q sends the brute-force top T with s * sign(g_j), s the mean top-T magnitude") {
  SqCompressor c;
  tern::Rng rng(1);
  for (size_t d : {10, 1000, 100000}) {
    const auto g = gaussianGradient(d, d + 1);
    for (size_t t : {size_t(1), d / 10 + 1, d}) {
      const Compressed out = c.compress(g, uint32_t(t), rng);
      const auto want = bruteForceTopK(g, t);
      double sum = 0.0;
      for (uint32_t j : want) sum += std::fabs(double(g[j]));
      const float s = float(sum / double(t));
      std::vector<float> dense(d, 0.0f);
      for (uint32_t j : want) dense[j] = std::signbit(g[j]) ? -s : s;
      CHECK(bitwiseEqual(toDense(out.decoded), dense));
    }
  }
}

TEST_CASE("S+Q follows POLO's test vector: keeping the two largest gives +-s at 6 and 7") {
  const std::vector<float> x{-5, 1, 12, -7, 0, 0, -100, 500, 6, -30};
  SqCompressor c;
  tern::Rng rng(1);
  const Compressed out = c.compress(x, 2, rng);
  CHECK(out.decoded.indices == std::vector<uint32_t>{6, 7});
  CHECK(out.decoded.values == std::vector<float>{-300.0f, 300.0f});
}

TEST_CASE("S+Q drops zero coordinates instead of giving them a sign") {
  std::vector<float> g(20, 0.0f);
  g[3] = -2.0f;
  g[9] = 4.0f;
  SqCompressor c;
  tern::Rng rng(1);
  const Compressed out = c.compress(g, 5, rng);
  CHECK(out.decoded.indices == std::vector<uint32_t>{3, 9});
  CHECK(out.decoded.values == std::vector<float>{-3.0f, 3.0f});
}

// The compiler's own IEEE half type is the reference: GCC 12 offers _Float16 to C++ on x86 only
// (it predefines __FLT16_MAX__ on AArch64 too), and AArch64 has __fp16 in the same format.
#if defined(__aarch64__)
#define TERN_TEST_HALF __fp16
#elif defined(__FLT16_MAX__)
#define TERN_TEST_HALF _Float16
#endif

#if defined(TERN_TEST_HALF)
TEST_CASE("the branch-free fp16 conversions agree with the compiler's half type") {
  tern::Rng rng(17);
  for (int i = 0; i < 2000000; ++i) {
    // Uniform over the bit patterns of floats up to 65504 in magnitude.
    const uint32_t bits = uint32_t(rng() % 0x477FE001u) | (uint32_t(rng() & 1) << 31);
    const float x = std::bit_cast<float>(bits);
    const TERN_TEST_HALF h = static_cast<TERN_TEST_HALF>(x);
    REQUIRE(floatToHalfFinite(x) == std::bit_cast<uint16_t>(h));
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (!halfIsFinite(uint16_t(h))) continue;
    const float want = static_cast<float>(std::bit_cast<TERN_TEST_HALF>(uint16_t(h)));
    REQUIRE(std::bit_cast<uint32_t>(halfToFloatFinite(uint16_t(h))) ==
            std::bit_cast<uint32_t>(want));
  }
}
#endif

TEST_CASE("fp16 rounds every float to the nearest half, ties to even, saturating at 65504") {
  tern::Rng rng(3);
  auto nearestCheck = [](float x) {
    const uint16_t h = floatToHalf(x);
    const double got = halfToFloat(h);
    CHECK(halfIsFinite(h));
    // Neighbours in the half grid (same sign): the pick must be at least as close as both.
    for (int step : {-1, 1}) {
      const uint16_t n = uint16_t((h & 0x7FFF) + step) | (h & 0x8000);
      if ((h & 0x7FFF) == 0 && step < 0) continue;
      if (!halfIsFinite(n)) continue;
      const double other = halfToFloat(n);
      const double dg = std::fabs(got - x), dn = std::fabs(other - x);
      CHECK(dg <= dn);
      if (dg == dn) CHECK((h & 1) == 0);
    }
  };
  for (int i = 0; i < 200000; ++i) {
    float x = std::bit_cast<float>(uint32_t(rng()));
    if (!std::isfinite(x) || std::fabs(x) > 65504.0f) continue;
    nearestCheck(x);
  }
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite half round-trips exactly
    CHECK(floatToHalf(halfToFloat(uint16_t(h))) == h);
    CHECK(floatToHalf(-halfToFloat(uint16_t(h))) == uint16_t(h | 0x8000));
  }
  Fp16Compressor c;
  const std::vector<float> big{1e6f, -1e6f, 65519.0f, 1e-9f};
  const Compressed out = c.compress(big, 0, rng);
  CHECK(out.decoded.values == std::vector<float>{65504.0f, -65504.0f, 65504.0f, 0.0f});
}
