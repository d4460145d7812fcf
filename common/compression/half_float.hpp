#pragma once
// IEEE 754 binary16 conversion in portable integer code (no F16C / NEON assumption, so the same
// bits come out on every host): round to nearest, ties to even, subnormals kept. The *Finite
// forms have no data-dependent branches, so loops over them vectorise; the general forms add
// the infinity and NaN cases.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/compression/wire_format.hpp"

namespace tern::compression {

inline constexpr float kHalfMax = 65504.0f;

// Selects without a branch (a conditional expression here is not if-converted by GCC, which
// then leaves the whole loop scalar).
inline uint32_t selectBits(bool take_first, uint32_t first, uint32_t second) {
  const uint32_t m = 0u - uint32_t(take_first);
  return (first & m) | (second & ~m);
}

// For finite x; magnitudes above 65504 saturate to 65504 (compared as bits, which order
// non-negative floats numerically).
inline uint16_t floatToHalfFinite(float x) {
  const uint32_t bits = wire::floatBits(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t a = std::min(bits & 0x7FFFFFFFu, 0x477FE000u);
  // Normal results: rebias the exponent, then round at bit 13 to nearest even (adding 0xFFF
  // plus the lowest kept bit carries exactly when the dropped part is above half, or half with
  // an odd kept part).
  const uint32_t normal = (a + ((15u - 127u) << 23) + 0xFFFu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14 the result is a multiple of 2^-24: adding 0.5f makes the FPU round |x| to that
  // grid (ties to even), and the low mantissa bits of the sum are the half's bits.
  const uint32_t sub = wire::floatBits(wire::bitsFloat(a) + 0.5f) - wire::floatBits(0.5f);
  return uint16_t(sign | selectBits(a < 0x38800000u, sub, normal));
}

inline uint16_t floatToHalf(float f) {
  const uint32_t bits = wire::floatBits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  const uint32_t x = bits & 0x7FFFFFFFu;
  if (x >= 0x7F800000u) return uint16_t(sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (x >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // rounds past 65504
  return floatToHalfFinite(f);
}

inline bool halfIsFinite(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }

// The float bits of finite h (exponent field not all ones). Loops vectorise over this integer
// form, not over one returning float (GCC 12 finds no vector type for that store).
inline uint32_t halfToFloatBitsFinite(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t a = h & 0x7FFFu;
  const uint32_t normal = (a << 13) + ((127u - 15u) << 23);
  const uint32_t sub = wire::floatBits(float(int32_t(a)) * 0x1p-24f);  // exact: a < 2^10
  return sign | selectBits(a < 0x400u, sub, normal);
}

inline float halfToFloatFinite(uint16_t h) { return wire::bitsFloat(halfToFloatBitsFinite(h)); }

// Converts n finite halves to floats through a word buffer, in vectorisable loops.
inline void halvesToFloats(const uint16_t* in, size_t n, float* out) {
  constexpr size_t kBlock = 1024;
  uint32_t bits[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t len = std::min(kBlock, n - base);
    for (size_t i = 0; i < len; ++i) bits[i] = halfToFloatBitsFinite(in[base + i]);
    std::memcpy(out + base, bits, len * 4);
  }
}

inline float halfToFloat(uint16_t h) {
  if (!halfIsFinite(h))
    return wire::bitsFloat((uint32_t(h & 0x8000u) << 16) | 0x7F800000u |
                           (uint32_t(h & 0x3FFu) << 13));
  return halfToFloatFinite(h);
}

}  // namespace tern::compression
