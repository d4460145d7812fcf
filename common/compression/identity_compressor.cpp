#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

Compressed IdentityCompressor::compress(std::span<const float> g, uint32_t, Rng&) {
  const uint32_t d = detail::checkedDim(g, "identity");
  detail::requireAllFinite(g, "identity");
  Compressed c;
  c.bytes = wire::encodeFp32(wire::Scheme::kIdentity, d, {}, g);
  if (decodedWanted())
    c.decoded = wire::canonicalGradient(d, {}, std::vector<float>(g.begin(), g.end()));
  return c;
}

size_t IdentityCompressor::encodedBytes(uint32_t dim, uint32_t) const {
  return detail::sparseBytesBound(wire::Scheme::kIdentity, dim, dim);
}

}  // namespace tern::compression
