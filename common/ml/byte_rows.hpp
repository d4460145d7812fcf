#pragma once
// Rows of byte features with their zero bytes left out: images are mostly background (half of
// Fashion-MNIST's pixels are 0), so a row keeps a bit mask of its non-zero bytes and only those.
// Rows are appended once and read back whole; storage grows in blocks, never by copying.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tern::ml {

class ByteRows {
 public:
  ByteRows() = default;
  explicit ByteRows(size_t cols) : cols_(cols), mask_bytes_((cols + 7) / 8) {}
  // Storage for `rows` rows' masks and starts, so that appending them allocates only values.
  void reserve(size_t rows);

  size_t rows() const { return starts_.size(); }
  size_t cols() const { return cols_; }
  // Bytes the value blocks hold room for (the non-zero bytes and the room left in the blocks).
  size_t valueCapacity() const;
  // Appends a row of cols() bytes.
  void append(std::span<const uint8_t> row);
  // Appends row r of `other` (of the same cols()).
  void appendRowOf(const ByteRows& other, size_t r);
  // Row r as bytes (out has cols() entries).
  void unpack(size_t r, std::span<uint8_t> out) const;
  // Row r as floats, float(byte) * scale each (out has cols() entries).
  void toFloats(size_t r, float scale, float* out) const;
  // Byte (r, c).
  uint8_t at(size_t r, size_t c) const;

 private:
  // Blocks grow with what is held, from kFirstBlockBytes to kBlockBytes: a shard of a few
  // hundred rows holds little more than its rows, a large one few blocks; rows never move.
  static constexpr size_t kFirstBlockBytes = size_t{1} << 12;
  static constexpr size_t kBlockBytes = size_t{1} << 18;
  // Room for `n` more bytes in one block (a new one when the last is full); where they start.
  uint8_t* place(size_t n);
  const uint8_t* valuesOf(size_t r) const;
  const uint8_t* maskOf(size_t r) const { return masks_.data() + r * mask_bytes_; }

  size_t cols_ = 0;
  size_t mask_bytes_ = 0;
  std::vector<uint8_t> masks_;    // rows x mask_bytes_, bit c of row r: byte (r, c) is not 0
  std::vector<uint64_t> starts_;  // block << 32 | offset: where each row's non-zero bytes are
  std::vector<std::vector<uint8_t>> blocks_;  // each filled up to its capacity, never moved
};

}  // namespace tern::ml
