#pragma once
// Passes over float arrays in forms the compiler keeps fast: a finiteness test it vectorizes, and
// sums in independent running sums instead of one chain of dependent additions.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tern {

// 1 when x is infinite or NaN (its exponent bits all ones), else 0; or-ed over an array, the loop
// vectorizes (an early exit or std::isfinite per value does not).
inline uint32_t nonFiniteBit(float x) {
  return uint32_t((std::bit_cast<uint32_t>(x) & 0x7F800000u) == 0x7F800000u);
}

// The sum of term(x) over v, in double, kept in eight running sums added pairwise in a fixed
// order: the same values give the same sum on every machine.
template <class Term>
double laneSum(std::span<const float> v, Term term) {
  constexpr size_t kLanes = 8;
  double lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= v.size(); i += kLanes) {
    for (size_t k = 0; k < kLanes; ++k) lanes[k] += term(v[i + k]);
  }
  for (; i < v.size(); ++i) lanes[0] += term(v[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// laneSum(v, x -> double(x) * double(x)), two lanes to a vector register: every running sum
// takes the same values in the same order, so the bits are laneSum's, in a loop the compiler keeps
// vectorized (the scalar form's eight sums stay scalar).
inline double laneSumOfSquares(std::span<const float> v) {
  typedef double Pair __attribute__((vector_size(16)));
  Pair sums[4] = {};
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    for (size_t m = 0; m < 4; ++m) {
      const Pair d = {double(v[i + 2 * m]), double(v[i + 2 * m + 1])};
      const Pair squares = d * d;
      sums[m] += squares;
    }
  }
  double lanes[8];
  for (size_t m = 0; m < 4; ++m) {
    lanes[2 * m] = sums[m][0];
    lanes[2 * m + 1] = sums[m][1];
  }
  for (; i < v.size(); ++i) lanes[0] += double(v[i]) * double(v[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace tern
