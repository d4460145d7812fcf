#pragma once
// A push's gradient with every coordinate given (no index list), for the aggregation tests.
#include <cstdint>
#include <utility>
#include <vector>

#include "common/compression/compressor.hpp"

inline tern::compression::SparseGradient dense(std::vector<float> v) {
  tern::compression::SparseGradient g;
  g.dim = uint32_t(v.size());
  g.values = std::move(v);
  return g;
}
