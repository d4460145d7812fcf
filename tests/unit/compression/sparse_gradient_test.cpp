#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/util/rng.hpp"

using namespace tern::compression;

TEST_CASE("toDense places sparse values at their indices and zeros elsewhere") {
  SparseGradient g{5, {1, 4}, {2.5f, -1.0f}};
  const std::vector<float> want{0.0f, 2.5f, 0.0f, 0.0f, -1.0f};
  CHECK(toDense(g) == want);
}

TEST_CASE("toDense of a dense gradient is its values") {
  SparseGradient g{3, {}, {1.0f, 2.0f, 3.0f}};
  CHECK(g.isDense());
  CHECK(toDense(g) == g.values);
}

TEST_CASE("addScaled adds weight times the gradient to the output") {
  std::vector<float> out{1.0f, 1.0f, 1.0f};
  addScaled(SparseGradient{3, {0, 2}, {2.0f, 4.0f}}, 0.5f, out);
  CHECK(out == std::vector<float>{2.0f, 1.0f, 3.0f});
  addScaled(SparseGradient{3, {}, {1.0f, 2.0f, 3.0f}}, -1.0f, out);
  CHECK(out == std::vector<float>{1.0f, -1.0f, 0.0f});
}

TEST_CASE("addScaled refuses an output of the wrong dimension") {
  std::vector<float> out(2);
  CHECK_THROWS_AS(addScaled(SparseGradient{3, {0}, {1.0f}}, 1.0f, out), std::invalid_argument);
}

TEST_CASE("an index past the dimension is refused before anything is read or written") {
  std::vector<float> out{1.0f, 2.0f, 3.0f};
  const SparseGradient bad{3, {0, 1, 3}, {1.0f, 1.0f, 1.0f}};
  CHECK_THROWS_AS(addScaled(bad, 1.0f, out), std::invalid_argument);
  CHECK(out == std::vector<float>{1.0f, 2.0f, 3.0f});
  CHECK_THROWS_AS(staysFinite(bad, 1.0f, out), std::invalid_argument);
  const SparseGradient last{3, {2}, {1.0f}};  // the last coordinate is in range
  CHECK(staysFinite(last, 1.0f, out));
}

TEST_CASE("staysFinite says whether adding the gradient leaves every coordinate finite") {
  const float big = std::numeric_limits<float>::max();
  const float inf = std::numeric_limits<float>::infinity();
  // Dense, at lengths around the vector width, with the bad coordinate anywhere.
  for (size_t n : {1, 3, 4, 5, 8, 17, 1000}) {
    for (size_t bad = 0; bad < n; bad += (n > 20 ? 97 : 1)) {
      std::vector<float> out(n, 1.0f);
      SparseGradient g;
      g.dim = uint32_t(n);
      g.values.assign(n, 0.5f);
      CHECK(staysFinite(g, 1.0f, out));
      out[bad] = big;
      g.values[bad] = big;  // overflows to infinity
      CHECK_FALSE(staysFinite(g, 1.0f, out));
      out[bad] = inf;
      g.values[bad] = -inf;  // infinity minus infinity: NaN
      CHECK_FALSE(staysFinite(g, 1.0f, out));
      out[bad] = 1.0f;
      g.values[bad] = std::numeric_limits<float>::quiet_NaN();
      CHECK_FALSE(staysFinite(g, 1.0f, out));
      CHECK_FALSE(staysFinite(g, 0.0f, out));  // 0 * NaN is NaN
    }
  }
  // Sparse: only the listed coordinates are looked at.
  std::vector<float> out{1.0f, inf, 2.0f};
  SparseGradient s;
  s.dim = 3;
  s.indices = {0, 2};
  s.values = {1.0f, -2.0f};
  CHECK(staysFinite(s, 1.0f, out));
  s.values = {big, big};
  out[0] = big;
  CHECK_FALSE(staysFinite(s, 1.0f, out));
}

TEST_CASE("addScaledIfFinite has addScaled's bits when finite and leaves out as it was when not") {
  const float big = std::numeric_limits<float>::max();
  tern::Rng rng(11);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> saved;
  for (uint32_t n : {1u, 7u, 64u, 1000u}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> out(n);
      for (auto& x : out) x = value(rng);
      SparseGradient g;
      g.dim = n;
      for (uint32_t j = 0; j < n; ++j) {
        if (rng() % 3 == 0) {
          g.indices.push_back(j);
          g.values.push_back(value(rng));
        }
      }
      // A repeated index too (the decoder refuses them; the function must not care).
      if (!g.indices.empty()) {
        g.indices.push_back(g.indices.front());
        g.values.push_back(value(rng));
      }
      const float weight = value(rng);
      std::vector<float> expected = out;
      addScaled(g, weight, expected);
      std::vector<float> got = out;
      REQUIRE(addScaledIfFinite(g, weight, got, saved));
      REQUIRE(std::memcmp(got.data(), expected.data(), n * sizeof(float)) == 0);
      if (g.indices.empty()) continue;
      // One overflowing coordinate (last, first or the repeated one): nothing stays applied.
      const size_t at = size_t(rng() % g.indices.size());
      std::vector<float> before = got;
      before[g.indices[at]] = big;
      got = before;
      g.values[at] = big;
      CHECK_FALSE(addScaledIfFinite(g, 1.0f, got, saved));
      CHECK(std::memcmp(got.data(), before.data(), n * sizeof(float)) == 0);
      g.values[at] = std::numeric_limits<float>::quiet_NaN();
      CHECK_FALSE(addScaledIfFinite(g, 1.0f, got, saved));
      CHECK(std::memcmp(got.data(), before.data(), n * sizeof(float)) == 0);
    }
  }
  // Dense, and an index out of range (refused before anything is touched).
  std::vector<float> out{1.0f, 2.0f, 3.0f};
  SparseGradient dense{3, {}, {1.0f, big, 1.0f}};
  out[1] = big;
  CHECK_FALSE(addScaledIfFinite(dense, 1.0f, out, saved));
  CHECK(out == std::vector<float>{1.0f, big, 3.0f});
  dense.values[1] = -1.0f;
  CHECK(addScaledIfFinite(dense, 1.0f, out, saved));
  CHECK(out == std::vector<float>{2.0f, big - 1.0f, 4.0f});
  const SparseGradient outside{3, {0, 3}, {1.0f, 1.0f}};
  CHECK_THROWS_AS(addScaledIfFinite(outside, 1.0f, out, saved), std::invalid_argument);
  CHECK(out == std::vector<float>{2.0f, big - 1.0f, 4.0f});
}
