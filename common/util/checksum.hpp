#pragma once
// FNV-1a over the raw bytes of a parameter vector: replicas are compared bit for bit.
#include <cstdint>
#include <cstring>
#include <span>

namespace tern {

inline constexpr uint64_t kFnvOffset = 1469598103934665603ULL;

// One FNV-1a step over the `bytes` low-order bytes of `word`, lowest first.
inline uint64_t fnv1a(uint64_t h, uint64_t word, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    h ^= (word >> (8 * i)) & 0xFFu;
    h *= 1099511628211ULL;
  }
  return h;
}

inline uint64_t checksum(std::span<const float> values) {
  uint64_t h = kFnvOffset;
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h = fnv1a(h, bits, 4);
  }
  return h;
}

}  // namespace tern
