#include "message.hpp"

#include <cstring>

namespace tern {

std::vector<uint8_t> floatsToBytes(std::span<const float> values) {
  std::vector<uint8_t> out(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

bool bytesToFloats(std::span<const uint8_t> bytes, std::span<float> out) {
  if (bytes.size() != out.size() * sizeof(float)) return false;
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return true;
}

}  // namespace tern
