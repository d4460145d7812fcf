#include "common/ml/byte_rows.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace tern::ml {
namespace {

size_t nonZeros(const uint8_t* mask, size_t mask_bytes) {
  size_t n = 0;
  for (size_t b = 0; b < mask_bytes; ++b) n += size_t(std::popcount(mask[b]));
  return n;
}

}  // namespace

void ByteRows::reserve(size_t rows) {
  masks_.reserve(rows * mask_bytes_);
  starts_.reserve(rows);
}

size_t ByteRows::valueCapacity() const {
  size_t held = 0;
  for (const auto& b : blocks_) held += b.capacity();
  return held;
}

uint8_t* ByteRows::place(size_t n) {
  if (blocks_.empty() || blocks_.back().capacity() - blocks_.back().size() < n) {
    const size_t room = std::clamp(valueCapacity(), kFirstBlockBytes, kBlockBytes);
    blocks_.emplace_back().reserve(std::max(n, room));
  }
  auto& block = blocks_.back();
  starts_.push_back(uint64_t(blocks_.size() - 1) << 32 | block.size());
  block.resize(block.size() + n);
  return block.data() + block.size() - n;
}

const uint8_t* ByteRows::valuesOf(size_t r) const {
  return blocks_[starts_[r] >> 32].data() + (starts_[r] & 0xffffffffu);
}

void ByteRows::append(std::span<const uint8_t> row) {
  if (row.size() != cols_) throw std::invalid_argument("ByteRows::append: wrong row length");
  const size_t first = masks_.size();
  masks_.resize(first + mask_bytes_, 0);
  size_t n = 0;
  for (size_t c = 0; c < cols_; ++c) {
    if (row[c] == 0) continue;
    masks_[first + c / 8] |= uint8_t(1u << (c % 8));
    ++n;
  }
  uint8_t* out = place(n);
  for (uint8_t v : row) {
    if (v != 0) *out++ = v;
  }
}

void ByteRows::appendRowOf(const ByteRows& other, size_t r) {
  if (other.cols_ != cols_) throw std::invalid_argument("ByteRows::appendRowOf: other width");
  const uint8_t* mask = other.maskOf(r);
  masks_.insert(masks_.end(), mask, mask + mask_bytes_);
  const size_t n = nonZeros(mask, mask_bytes_);
  std::copy_n(other.valuesOf(r), n, place(n));
}

void ByteRows::unpack(size_t r, std::span<uint8_t> out) const {
  const uint8_t* mask = maskOf(r);
  const uint8_t* values = valuesOf(r);
  for (size_t c = 0; c < cols_; ++c) out[c] = (mask[c / 8] >> (c % 8)) & 1 ? *values++ : 0;
}

void ByteRows::toFloats(size_t r, float scale, float* out) const {
  const uint8_t* mask = maskOf(r);
  const uint8_t* values = valuesOf(r);
  for (size_t c = 0; c < cols_; ++c) {
    const uint8_t v = (mask[c / 8] >> (c % 8)) & 1 ? *values++ : 0;
    out[c] = static_cast<float>(v) * scale;
  }
}

uint8_t ByteRows::at(size_t r, size_t c) const {
  const uint8_t* mask = maskOf(r);
  if (!((mask[c / 8] >> (c % 8)) & 1)) return 0;
  size_t before = nonZeros(mask, c / 8);
  before += size_t(std::popcount(uint8_t(mask[c / 8] & ((1u << (c % 8)) - 1))));
  return valuesOf(r)[before];
}

}  // namespace tern::ml
