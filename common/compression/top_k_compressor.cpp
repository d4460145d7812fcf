#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

Compressed TopKCompressor::compress(std::span<const float> g, uint32_t level, Rng&) {
  const uint32_t d = detail::checkedDim(g, "topk");
  std::vector<uint32_t> idx;
  std::vector<float> values;
  selector_.select(g, detail::clampLevel(level, d), idx, values);
  detail::requireAllFinite(values, "topk");
  Compressed c;
  c.bytes = wire::encodeFp32(wire::Scheme::kTopK, d, idx, values);
  c.decoded = wire::canonicalGradient(d, std::move(idx), std::move(values));
  return c;
}

size_t TopKCompressor::encodedBytes(uint32_t dim, uint32_t level) const {
  return detail::sparseBytesBound(wire::Scheme::kTopK, dim, detail::clampLevel(level, dim));
}

}  // namespace tern::compression
