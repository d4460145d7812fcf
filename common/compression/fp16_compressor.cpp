#include <algorithm>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/half_float.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

Compressed Fp16Compressor::compress(std::span<const float> g, uint32_t, Rng&) {
  const uint32_t d = detail::checkedDim(g, "fp16");
  wire::Header h;
  h.scheme = wire::Scheme::kFp16;
  h.coding = wire::IndexCoding::kDense;
  h.dim = d;
  h.count = d;
  Compressed c;
  const size_t at = wire::startMessage(c.bytes, h, 0, uint64_t(d) * 2);
  uint8_t* out = c.bytes.data() + at;
  std::vector<float> decoded(d);
  for (uint32_t j = 0; j < d; ++j) {
    detail::requireFinite(g[j], "fp16");
    const uint16_t half = floatToHalf(std::clamp(g[j], -kHalfMax, kHalfMax));
    out[2 * j] = uint8_t(half);
    out[2 * j + 1] = uint8_t(half >> 8);
    decoded[j] = halfToFloat(half);
  }
  wire::finishMessage(c.bytes);
  c.decoded = wire::canonicalGradient(d, {}, std::move(decoded));
  return c;
}

size_t Fp16Compressor::encodedBytes(uint32_t dim, uint32_t) const {
  return detail::sparseBytesBound(wire::Scheme::kFp16, dim, dim);
}

}  // namespace tern::compression
