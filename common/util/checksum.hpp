#pragma once
// FNV-1a over the raw bytes of a parameter vector: replicas are compared bit for bit.
#include <cstdint>
#include <cstring>
#include <span>

namespace tern {

inline uint64_t checksum(std::span<const float> values) {
  uint64_t h = 1469598103934665603ULL;
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 4; ++i) {
      h ^= (bits >> (8 * i)) & 0xFFu;
      h *= 1099511628211ULL;
    }
  }
  return h;
}

}  // namespace tern
