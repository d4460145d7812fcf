#pragma once
// Portable draws on a tern::Rng. The standard distributions (uniform_int, normal) use
// library-specific algorithms; these do not, so a seed gives the same data and the same
// partition whichever standard library built the binary.
#include <cmath>
#include <cstddef>
#include <numbers>
#include <utility>

#include "common/util/rng.hpp"

namespace tern::ml::detail {

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform in [0, n) for n < 2^53 (bias about n * 2^-53, irrelevant at our sizes).
inline size_t uniformIndex(Rng& rng, size_t n) {
  const auto i = static_cast<size_t>(uniform01(rng) * static_cast<double>(n));
  return i < n ? i : n - 1;
}

// Standard normal by Box-Muller (one output per call, no cached state).
inline double gaussian(Rng& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]: log stays finite
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Fisher-Yates.
template <class It>
void shuffle(It first, It last, Rng& rng) {
  const auto n = static_cast<size_t>(last - first);
  for (size_t i = n; i > 1; --i) std::swap(first[i - 1], first[uniformIndex(rng, i)]);
}

}  // namespace tern::ml::detail
