#pragma once
// IEEE 754 binary16 conversion in portable integer code (no F16C / NEON assumption, so the same
// bits come out on every host): round to nearest, ties to even, subnormals kept.
#include <cstdint>

#include "common/compression/wire_format.hpp"

namespace tern::compression {

inline constexpr float kHalfMax = 65504.0f;

inline uint16_t floatToHalf(float f) {
  const uint32_t bits = wire::floatBits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t x = bits & 0x7FFFFFFFu;
  if (x >= 0x7F800000u) return uint16_t(sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (x >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // rounds past 65504
  if (x < 0x38800000u) {                                  // below 2^-14: subnormal or zero
    if (x < 0x33000000u) return sign;                     // below 2^-25 rounds to zero
    const uint32_t e = x >> 23;
    const uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value * 2^24 = m >> shift
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = (x >> 13) - ((127u - 15u) << 10);
  const uint32_t rem = x & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry moves into the exponent
  return uint16_t(sign | r);
}

inline bool halfIsFinite(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }

inline float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0) {
    const float mag = float(m) * 0x1p-24f;  // exact: m < 2^10
    return wire::bitsFloat(wire::floatBits(mag) | sign);
  }
  if (e == 31) return wire::bitsFloat(sign | 0x7F800000u | (m << 13));
  return wire::bitsFloat(sign | ((e + 112) << 23) | (m << 13));
}

}  // namespace tern::compression
