#include <cmath>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

Compressed SqCompressor::compress(std::span<const float> g, uint32_t level, Rng&) {
  const uint32_t d = detail::checkedDim(g, "sq");
  std::vector<uint32_t> idx;
  std::vector<float> values;
  selector_.select(g, detail::clampLevel(level, d), idx, values);
  // Drop exact zeros (present only when g has fewer than T non-zeros): s * sign(0) is not 0.
  size_t kept = 0;
  double sum = 0.0;
  std::vector<uint8_t> negative(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    const float v = values[i];
    detail::requireFinite(v, "sq");
    if (v == 0.0f) continue;
    idx[kept] = idx[i];
    negative[kept] = std::signbit(v) ? 1 : 0;
    ++kept;
    sum += std::fabs(double(v));
  }
  idx.resize(kept);
  negative.resize(kept);
  const float s = kept > 0 ? float(sum / double(kept)) : 0.0f;
  values.resize(kept);
  for (size_t i = 0; i < kept; ++i) values[i] = negative[i] ? -s : s;
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
