#pragma once
// Seeded randomness for everything in tern: one engine type, derived streams per purpose, so
// that the same seed gives the same run in the simulator, the daemons and the tests.
#include <cstdint>
#include <random>

namespace tern {

using Rng = std::mt19937_64;

// Derive an independent, reproducible stream from a base seed and a purpose tag (splitmix64).
inline uint64_t deriveSeed(uint64_t seed, uint64_t tag) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (tag + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace tern
