#pragma once
// tern's compact wire format for compressed gradients (versioned). Header: magic, version,
// scheme, dimension, count, scale; indices as delta-varint or bitmap, whichever is smaller;
// values as fp32, fp16, sign bits or packed QSGD levels. The decoder is strict: it checks every
// length before reading, indices in range and strictly increasing, count <= dimension, no
// trailing bytes, finite values, and the limits given. It never throws and never reads out of
// bounds: bad input yields an error string.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/compression/compressor.hpp"

namespace tern::compression {

struct DecodeLimits {
  uint32_t max_dim = 1u << 28;
  size_t max_bytes = size_t(1) << 30;
  uint32_t expected_dim = 0;  // when non-zero, the message's dimension must equal it
};

struct DecodeResult {
  std::optional<SparseGradient> value;
  std::string error;        // set when !value
  size_t header_bytes = 0;  // of a decoded message: its header, before the index section
};

DecodeResult decode(std::span<const uint8_t> bytes, const DecodeLimits& limits);
// The same, decoded into `scratch`'s buffers (their capacity reused: no allocation when they hold
// enough); on failure the buffers are handed back in `scratch`.
DecodeResult decode(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                    SparseGradient& scratch);

// A dense fp32 message (identity's pushes, a dense update) read where it lies, without a copy:
// the `count` values at `values` in the wire's order, unaligned (read each with std::memcpy).
struct DenseFp32View {
  const uint8_t* values = nullptr;
  uint32_t count = 0;  // the message's dimension
  size_t header_bytes = 0;
};
// The view when `bytes` is a dense fp32 message that passes every check decode() makes except
// the finiteness of its values, which the caller's own pass over them must check; nullopt for
// any other message (decode() it: it says what is wrong, if anything).
std::optional<DenseFp32View> denseFp32View(std::span<const uint8_t> bytes,
                                           const DecodeLimits& limits);
// out += weight * view when every value and every sum is finite, else false and out unchanged.
bool addDenseIfFinite(const DenseFp32View& view, float weight, std::span<float> out);

// Encode a plain update (sparse or dense, fp32 values) for the coordinator's broadcast.
std::vector<uint8_t> encodeUpdate(const SparseGradient& update);
// The same into `out` (cleared first; its capacity reused).
void encodeUpdateInto(const SparseGradient& update, std::vector<uint8_t>& out);

}  // namespace tern::compression
