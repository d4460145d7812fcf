#pragma once
// Small helpers shared by the compressor implementations.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include "common/compression/wire_format.hpp"
#include "common/util/float_passes.hpp"
#include "common/util/rng.hpp"

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

// One vectorisable pass: a float is finite unless its exponent bits are all ones.
inline bool allFinite(std::span<const float> g) {
  uint32_t bad = 0;
  for (float x : g) bad |= nonFiniteBit(x);
  return bad == 0;
}

inline void requireAllFinite(std::span<const float> g, const char* who) {
  if (!allFinite(g))
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

// Uniform integer in [0, n) for n >= 1 (Lemire's multiply-shift with rejection): unbiased and
// the same on every platform, unlike std::uniform_int_distribution.
inline uint32_t uniformBelow(Rng& rng, uint32_t n) {
  uint64_t m = uint64_t(uint32_t(rng() >> 32)) * n;
  uint32_t low = uint32_t(m);
  if (low < n) {
    const uint32_t floor = uint32_t(-n) % n;
    while (low < floor) {
      m = uint64_t(uint32_t(rng() >> 32)) * n;
      low = uint32_t(m);
    }
  }
  return uint32_t(m >> 32);
}

// Per-coordinate coin flips (stochastic rounding, stochastic sparsification) need one uniform
// per coordinate; a splitmix64 stream seeded from the caller's Rng costs about a nanosecond per
// draw instead of several for the Mersenne Twister, and stays reproducible from the same seed.
class CoinStream {
 public:
  explicit CoinStream(Rng& rng) : state_(rng()) {}
  // Uniform double in [0, 1) with 53 random bits.
  double uniform() { return double(next() >> 11) * 0x1p-53; }
  // n uniforms with 53 bits each, and 2n-ish with 24 bits each (two per draw), in a separate
  // pass so that the loops consuming them have no serial state and vectorise.
  void fill(std::span<double> out) {
    for (double& u : out) u = uniform();
  }
  void fill24(std::span<float> out) {
    size_t i = 0;
    for (; i + 2 <= out.size(); i += 2) {
      const uint64_t z = next();
      out[i] = float(uint32_t(z) >> 8) * 0x1p-24f;
      out[i + 1] = float(uint32_t(z >> 32) >> 8) * 0x1p-24f;
    }
    if (i < out.size()) out[i] = float(uint32_t(next()) >> 8) * 0x1p-24f;
  }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// Upper bound over every count <= `count`: the bound grows with the count except that
// count == dim needs no index section, so a message one short of dense may be larger.
inline size_t sparseBytesBoundUpTo(wire::Scheme scheme, uint32_t dim, uint32_t count) {
  const size_t at = sparseBytesBound(scheme, dim, count);
  if (count < dim || dim < 2) return at;
  const size_t below = sparseBytesBound(scheme, dim, dim - 1);
  return at > below ? at : below;
}

}  // namespace tern::compression::detail
