#pragma once
// Shared fixtures for the compression suite: gradient generators, brute-force references and a
// well-formedness check for anything decode() returns.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "common/util/rng.hpp"

namespace tern::compression::testing {

inline std::vector<float> gaussianGradient(size_t d, uint64_t seed, float sigma = 1.0f) {
  Rng rng(seed);
  std::normal_distribution<float> n(0.0f, sigma);
  std::vector<float> g(d);
  for (float& x : g) x = n(rng);
  return g;
}

// Few distinct magnitudes, signed zeros included: exercises ties everywhere.
inline std::vector<float> tiedGradient(size_t d, uint64_t seed) {
  Rng rng(seed);
  const float palette[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f};
  std::vector<float> g(d);
  for (float& x : g) x = palette[rng() % 7];
  return g;
}

// Reference: sort all indices by (|g| descending, index ascending), keep k, sort by index.
inline std::vector<uint32_t> bruteForceTopK(const std::vector<float>& g, size_t k) {
  std::vector<uint32_t> order(g.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
  order.resize(std::min(k, g.size()));
  std::sort(order.begin(), order.end());
  return order;
}

// What a decoded gradient must satisfy whatever bytes produced it.
inline bool wellFormed(const SparseGradient& g) {
  if (g.dim == 0) return false;
  for (float v : g.values)
    if (!std::isfinite(v)) return false;
  if (g.isDense()) return true;
  if (g.indices.size() != g.values.size() || g.indices.size() > g.dim) return false;
  for (size_t i = 0; i < g.indices.size(); ++i) {
    if (g.indices[i] >= g.dim) return false;
    if (i > 0 && g.indices[i] <= g.indices[i - 1]) return false;
  }
  return true;
}

inline bool bitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  return true;
}

inline bool sameGradient(const SparseGradient& a, const SparseGradient& b) {
  return a.dim == b.dim && a.indices == b.indices && bitwiseEqual(a.values, b.values);
}

}  // namespace tern::compression::testing
