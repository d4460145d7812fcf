#include <cmath>
#include <stdexcept>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

ThresholdCompressor::ThresholdCompressor(double lambda) {
  if (!std::isfinite(lambda) || lambda < 0.0)
    throw std::invalid_argument("threshold: lambda must be finite and >= 0");
  // |g_j| is a float, so |g_j| >= lambda exactly when |g_j| >= the smallest float >= lambda.
  float f = float(lambda);
  if (double(f) < lambda) f = std::nextafter(f, INFINITY);
  key_ = magnitudeKey(f);
}

Compressed ThresholdCompressor::compress(std::span<const float> g, uint32_t limit, Rng&) {
  const uint32_t d = detail::checkedDim(g, "threshold");
  std::vector<uint32_t> idx;
  std::vector<float> values;
  selector_.selectAtLeast(g, key_, idx, values);
  last_passed_ = idx.size();
  // More pass than a push may carry: the largest `limit` of them, which are the top `limit` of
  // g (every one of them passes).
  if (limit > 0 && idx.size() > limit) selector_.select(g, limit, idx, values);
  for (float v : values) detail::requireFinite(v, "threshold");  // NaN passes every threshold
  Compressed c;
  c.bytes = wire::encodeFp32(wire::Scheme::kThreshold, d, idx, values);
  c.decoded = wire::canonicalGradient(d, std::move(idx), std::move(values));
  return c;
}

size_t ThresholdCompressor::encodedBytes(uint32_t dim, uint32_t level) const {
  return detail::sparseBytesBound(wire::Scheme::kThreshold, dim, level > dim ? dim : level);
}

}  // namespace tern::compression
