#include <doctest/doctest.h>

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
