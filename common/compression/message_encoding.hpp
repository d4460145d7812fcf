#pragma once
// Writers for whole messages of the wire format (wire_format.hpp), shared by the compressors and
// by encodeUpdate, plus the canonical decoded form so that a compressor's `decoded` is bit for
// bit what decode() will return.
#include <cstdint>
#include <span>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/compression/wire_format.hpp"

namespace tern::compression::wire {

// Dense form (indices empty) when every coordinate is present, sparse form otherwise.
SparseGradient canonicalGradient(uint32_t dim, std::vector<uint32_t> indices,
                                 std::vector<float> values);

// fp32 values at strictly increasing indices; indices empty with values.size() == dim means dense.
std::vector<uint8_t> encodeFp32(Scheme scheme, uint32_t dim, std::span<const uint32_t> indices,
                                std::span<const float> values);
// The same into `out` (cleared first; its capacity reused).
void encodeFp32Into(std::vector<uint8_t>& out, Scheme scheme, uint32_t dim,
                    std::span<const uint32_t> indices, std::span<const float> values);

// S+Q: indices, one sign bit per index (set when negative) and the common magnitude.
std::vector<uint8_t> encodeSigns(uint32_t dim, std::span<const uint32_t> indices,
                                 std::span<const uint8_t> negative, float scale);

// Header plus zeroed room for the index and value sections and the BitWriter's slack; returns
// the offset of the index section. finishMessage drops the slack once the sections are written.
size_t startMessage(std::vector<uint8_t>& out, const Header& h, size_t index_bytes,
                    uint64_t value_bytes);
void finishMessage(std::vector<uint8_t>& out);

}  // namespace tern::compression::wire
