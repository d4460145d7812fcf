#include <cmath>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

Compressed SqCompressor::compress(std::span<const float> g, uint32_t level, Rng&) {
  const uint32_t d = detail::checkedDim(g, "sq");
  std::vector<uint32_t> idx;
  selector_.select(g, detail::clampLevel(level, d), idx);
  // Drop exact zeros (present only when g has fewer than T non-zeros): s * sign(0) is not 0.
  size_t kept = 0;
  double sum = 0.0;
  for (uint32_t j : idx) {
    detail::requireFinite(g[j], "sq");
    if (g[j] == 0.0f) continue;
    idx[kept++] = j;
    sum += std::fabs(double(g[j]));
  }
  idx.resize(kept);
  const float s = kept > 0 ? float(sum / double(kept)) : 0.0f;
  std::vector<uint8_t> negative(kept);
  std::vector<float> values(kept);
  for (size_t i = 0; i < kept; ++i) {
    negative[i] = std::signbit(g[idx[i]]) ? 1 : 0;
    values[i] = negative[i] ? -s : s;
  }
  Compressed c;
  c.bytes = wire::encodeSigns(d, idx, negative, s);
  c.decoded = wire::canonicalGradient(d, std::move(idx), std::move(values));
  return c;
}

size_t SqCompressor::encodedBytes(uint32_t dim, uint32_t level) const {
  // Zero entries are dropped, so the count can fall below T.
  return detail::sparseBytesBoundUpTo(wire::Scheme::kSq, dim, detail::clampLevel(level, dim));
}

}  // namespace tern::compression
