#include <algorithm>
#include <cstring>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/half_float.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

Compressed Fp16Compressor::compress(std::span<const float> g, uint32_t, Rng&) {
  const uint32_t d = detail::checkedDim(g, "fp16");
  detail::requireAllFinite(g, "fp16");
  wire::Header h;
  h.scheme = wire::Scheme::kFp16;
  h.coding = wire::IndexCoding::kDense;
  h.dim = d;
  h.count = d;
  Compressed c;
  const size_t at = wire::startMessage(c.bytes, h, 0, uint64_t(d) * 2);
  std::vector<float> decoded(d);
  // Branch-free conversions in plain loops over a small block buffer, so that they vectorise
  // without a large temporary.
  constexpr uint32_t kBlock = 4096;
  uint16_t halves[kBlock];
  for (uint32_t base = 0; base < d; base += kBlock) {
    const uint32_t n = std::min(kBlock, d - base);
    for (uint32_t j = 0; j < n; ++j) halves[j] = floatToHalfFinite(g[base + j]);  // saturates
    halvesToFloats(halves, n, decoded.data() + base);
    std::memcpy(c.bytes.data() + at + size_t(base) * 2, halves, size_t(n) * 2);  // LE host
  }
  wire::finishMessage(c.bytes);
  c.decoded = wire::canonicalGradient(d, {}, std::move(decoded));
  return c;
}

size_t Fp16Compressor::encodedBytes(uint32_t dim, uint32_t) const {
  return detail::sparseBytesBound(wire::Scheme::kFp16, dim, dim);
}

}  // namespace tern::compression
