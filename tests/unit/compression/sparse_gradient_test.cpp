#include <doctest/doctest.h>

#include <limits>

#include "common/compression/compressor.hpp"

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
