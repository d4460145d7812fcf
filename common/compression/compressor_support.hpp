#pragma once
// Small helpers shared by the compressor implementations.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include "common/compression/wire_format.hpp"

namespace tern::compression::detail {

// Compressors accept 1 <= d < 2^32 coordinates (the wire's dimension is a uint32).
inline uint32_t checkedDim(std::span<const float> g, const char* who) {
  if (g.empty() || g.size() > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument(std::string(who) + ": gradient size must be in [1, 2^32)");
  return uint32_t(g.size());
}

inline uint32_t clampLevel(uint32_t level, uint32_t dim) {
  return level < 1 ? 1 : level > dim ? dim : level;
}

// A non-finite value would be rejected by every receiver; refuse to produce it.
inline void requireFinite(float x, const char* who) {
  if (!std::isfinite(x))
    throw std::invalid_argument(std::string(who) + ": gradient holds a non-finite value");
}

// Upper bound on the size of a sparse message with `count` entries (see indexBytesBound).
inline size_t sparseBytesBound(wire::Scheme scheme, uint32_t dim, uint32_t count) {
  wire::Header h;
  h.scheme = scheme;
  h.dim = dim;
  h.count = count;
  return wire::headerBytes(h) + wire::indexBytesBound(dim, count) +
         size_t(wire::valueBytes(wire::valueCodingOf(scheme), count, 0));
}

}  // namespace tern::compression::detail
