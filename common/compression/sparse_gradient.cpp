#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/compression/compressor.hpp"
#include "common/util/float_passes.hpp"

namespace tern::compression {

namespace {

// Whether every index is below dim: one pass for the maximum (it vectorizes; a test and a throw
// per index inside the loops below would keep them scalar and branchy).
bool indicesBelow(const std::vector<uint32_t>& indices, uint32_t dim) {
  uint32_t top = 0;
  for (uint32_t j : indices) top = std::max(top, j);
  return indices.empty() || top < dim;
}

}  // namespace

void addScaled(const SparseGradient& g, float weight, std::span<float> out) {
  if (out.size() != g.dim) throw std::invalid_argument("addScaled: dimension mismatch");
  if (g.isDense()) {
    for (size_t j = 0; j < out.size(); ++j) out[j] += weight * g.values[j];
    return;
  }
  if (g.indices.size() != g.values.size())
    throw std::invalid_argument("addScaled: indices and values differ in length");
  if (!indicesBelow(g.indices, g.dim)) throw std::invalid_argument("addScaled: index out of range");
  for (size_t i = 0; i < g.indices.size(); ++i) out[g.indices[i]] += weight * g.values[i];
}

bool staysFinite(const SparseGradient& g, float weight, std::span<const float> out) {
  if (out.size() != g.dim) throw std::invalid_argument("staysFinite: dimension mismatch");
  if (g.isDense()) {
    uint32_t bad = 0;
    for (size_t j = 0; j < out.size(); ++j) bad |= nonFiniteBit(out[j] + weight * g.values[j]);
    return bad == 0;
  }
  if (g.indices.size() != g.values.size())
    throw std::invalid_argument("staysFinite: indices and values differ in length");
  if (!indicesBelow(g.indices, g.dim)) {
    throw std::invalid_argument("staysFinite: index out of range");
  }
  uint32_t bad = 0;
  for (size_t i = 0; i < g.indices.size(); ++i)
    bad |= nonFiniteBit(out[g.indices[i]] + weight * g.values[i]);
  return bad == 0;
}

bool addScaledIfFinite(const SparseGradient& g, float weight, std::span<float> out,
                       std::vector<float>& saved) {
  if (g.isDense()) {
    // Sequential: a check pass then the add costs less than keeping a model-sized copy.
    if (!staysFinite(g, weight, out)) return false;
    addScaled(g, weight, out);
    return true;
  }
  if (out.size() != g.dim) throw std::invalid_argument("addScaledIfFinite: dimension mismatch");
  if (g.indices.size() != g.values.size())
    throw std::invalid_argument("addScaledIfFinite: indices and values differ in length");
  if (!indicesBelow(g.indices, g.dim))
    throw std::invalid_argument("addScaledIfFinite: index out of range");
  const size_t n = g.indices.size();
  saved.resize(n);
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    float& o = out[g.indices[i]];
    saved[i] = o;
    o = o + weight * g.values[i];
    bad |= nonFiniteBit(o);
  }
  if (bad == 0) return true;
  // Backwards, so that a repeated index ends with the value it had before the first.
  for (size_t i = n; i-- > 0;) out[g.indices[i]] = saved[i];
  return false;
}

std::vector<float> toDense(const SparseGradient& g) {
  if (g.isDense()) return g.values;
  if (g.indices.size() != g.values.size())
    throw std::invalid_argument("toDense: indices and values differ in length");
  std::vector<float> out(g.dim, 0.0f);
  // Assignment, not accumulation, so a sent -0.0f stays -0.0f.
  for (size_t i = 0; i < g.indices.size(); ++i) {
    if (g.indices[i] >= g.dim) throw std::invalid_argument("toDense: index out of range");
    out[g.indices[i]] = g.values[i];
  }
  return out;
}

}  // namespace tern::compression
