#pragma once
// Building blocks of the compressed-gradient wire format shared by the compressors (which write
// it) and the strict decoder (codec.cpp, which reads it). Layout, all little-endian:
//   magic "TG" | version u8 | scheme u8 | index coding u8 | dim varint | count varint
//   | scale f32 (sq, qsgd) | levels varint (qsgd) | index section | value section
// The value section's size follows from (scheme, count), so the index section is whatever lies
// between the header and it; every coding must consume exactly that many bytes.
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace tern::compression::wire {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian and copied with memcpy");

inline constexpr uint8_t kMagic0 = 'T';
inline constexpr uint8_t kMagic1 = 'G';
inline constexpr uint8_t kVersion = 1;

enum class Scheme : uint8_t {
  kIdentity = 1,
  kFp16 = 2,
  kTopK = 3,
  kRandomK = 4,
  kThreshold = 5,
  kSq = 6,
  kStochastic = 7,
  kQsgd = 8,
  kUpdate = 9,  // the coordinator's aggregated step: sparse or dense fp32
};
inline constexpr uint8_t kMaxScheme = 9;

enum class IndexCoding : uint8_t {
  kDense = 0,        // every coordinate, no index section
  kDeltaVarint = 1,  // gaps (idx[0], idx[i] - idx[i-1] - 1) as LEB128
  kBitmap = 2,       // ceil(dim / 8) bytes, bit j set when j is kept
  kRice = 3,         // one parameter byte b, then each gap as unary(gap >> b) + b low bits
};
inline constexpr uint8_t kMaxIndexCoding = 3;

enum class ValueCoding : uint8_t { kFp32, kFp16, kSigns, kQsgdLevels };

ValueCoding valueCodingOf(Scheme s);
bool isDenseOnly(Scheme s);  // identity, fp16, qsgd: the index coding must be kDense
bool hasScale(Scheme s);     // sq (the magnitude s), qsgd (the norm)

inline constexpr uint32_t kMaxQsgdLevels = 65535;
// Bits per coordinate for QSGD: a signed level in [-s, s] stored as level + s.
unsigned qsgdBitsPerLevel(uint32_t levels);

// Bytes of the value section for `count` values.
uint64_t valueBytes(ValueCoding c, uint64_t count, uint32_t qsgd_levels);

struct Header {
  Scheme scheme = Scheme::kIdentity;
  IndexCoding coding = IndexCoding::kDense;
  uint32_t dim = 0;
  uint32_t count = 0;
  float scale = 0.0f;
  uint32_t qsgd_levels = 0;
};
size_t headerBytes(const Header& h);
void writeHeader(std::vector<uint8_t>& out, const Header& h);

// LEB128 for uint32 (1-5 bytes).
inline size_t varintBytes(uint32_t v) {
  return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}
inline uint8_t* putVarint(uint8_t* p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = uint8_t(v | 0x80);
    v >>= 7;
  }
  *p++ = uint8_t(v);
  return p;
}
// Canonical LEB128 only (no redundant trailing zero groups, no value above 2^32 - 1): the
// format then has exactly one spelling of each message. Returns false on any violation.
bool getVarint(const uint8_t*& p, const uint8_t* end, uint32_t& v);

// How the indices of one message are coded: chosen as the smallest of the codings.
struct IndexPlan {
  IndexCoding coding = IndexCoding::kDense;
  uint8_t rice_bits = 0;  // kRice only
  size_t bytes = 0;       // size of the index section
};
IndexPlan planIndices(uint32_t dim, std::span<const uint32_t> indices);
// Upper bound on planIndices(dim, any strictly increasing set of `count` indices).bytes, and
// the size the Rice coding reaches for indices spread uniformly: gaps sum to at most dim - count,
// so sum(gap >> b) <= (dim - count) >> b and the Rice section is at most
// 1 + ceil((count * (b + 1) + ((dim - count) >> b)) / 8) bytes for every b; planIndices always
// evaluates the b that minimises this bound, so its pick can only be smaller.
size_t indexBytesBound(uint32_t dim, uint32_t count);
// Fills plan.bytes bytes at `out`; a Rice section may also store zeros into the
// kBitWriterSlack bytes after it, so write the index section before what follows it.
void writeIndices(uint8_t* out, const IndexPlan& plan, uint32_t dim,
                  std::span<const uint32_t> indices);

// LSB-first bit packing. Each put stores eight bytes at the current byte, so the buffer needs
// kBitWriterSlack bytes past the last byte the bits fill; the bytes past the written bits are
// stored as zeros, which lets the writer run without a branch per byte.
inline constexpr size_t kBitWriterSlack = 8;

class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  // Appends the low `n` bits of v (n <= 32, v < 2^n).
  void put(uint64_t v, unsigned n) {
    acc_ |= v << fill_;
    fill_ += n;  // at most 7 + 32
    std::memcpy(out_, &acc_, 8);
    const unsigned bytes = fill_ >> 3;
    out_ += bytes;
    acc_ >>= 8 * bytes;
    fill_ &= 7;
  }
  void zeros(uint64_t n) {
    while (n > 32) {
      put(0, 32);
      n -= 32;
    }
    put(0, unsigned(n));
  }
  // Returns one past the last byte holding bits (the partial last byte is already stored).
  uint8_t* finish() {
    if (fill_ > 0) ++out_;
    acc_ = 0;
    fill_ = 0;
    return out_;
  }

 private:
  uint8_t* out_;
  uint64_t acc_ = 0;
  unsigned fill_ = 0;
};

// Fixed-width LSB-first packing of n symbols of `width` bits (1..32, each < 2^width) into
// exactly ceil(n * width / 8) bytes at `out`, and the inverse. Word-at-a-time: the hot loops of
// QSGD's encoder and decoder.
void packFixed(const uint32_t* symbols, size_t n, unsigned width, uint8_t* out);
void unpackFixed(const uint8_t* in, size_t n, unsigned width, uint32_t* symbols);

// Bounds-checked LSB-first bit reading over [data, data + size).
class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : data_(data), bits_(uint64_t(size) * 8) {}
  // Reads n <= 32 bits; false when fewer than n remain.
  bool get(unsigned n, uint32_t& v) {
    if (n == 0) {
      v = 0;
      return true;
    }
    if (bits_ - pos_ < n) return false;
    v = uint32_t(window() & ((uint64_t(1) << n) - 1));
    pos_ += n;
    return true;
  }
  // Counts zero bits up to the next one bit and consumes both; false when the run exceeds
  // max_zeros or the data ends first.
  bool unary(uint64_t max_zeros, uint64_t& zeros) {
    zeros = 0;
    for (;;) {
      const uint64_t left = bits_ - pos_;
      if (left == 0) return false;
      const unsigned avail = left < 56 ? unsigned(left) : 56u;
      uint64_t w = window();
      if (avail < 64) w &= (uint64_t(1) << avail) - 1;
      if (w == 0) {
        zeros += avail;
        pos_ += avail;
        if (zeros > max_zeros) return false;
        continue;
      }
      const unsigned tz = unsigned(std::countr_zero(w));
      zeros += tz;
      pos_ += tz + 1;
      return zeros <= max_zeros;
    }
  }
  uint64_t position() const { return pos_; }
  uint64_t size() const { return bits_; }
  // True when the bits after the current position are all zero (strict padding).
  bool restIsZero() const {
    uint64_t p = pos_;
    while (p < bits_) {
      if ((data_[p >> 3] >> (p & 7)) & 1u) return false;
      ++p;
    }
    return true;
  }

 private:
  // At least 56 valid bits starting at pos_ (fewer near the end, zero-filled).
  uint64_t window() const {
    const size_t byte = size_t(pos_ >> 3);
    const size_t nbytes = size_t(bits_ >> 3);
    uint64_t w = 0;
    if (nbytes - byte >= 8) {
      std::memcpy(&w, data_ + byte, 8);
    } else {
      for (size_t i = byte; i < nbytes; ++i) w |= uint64_t(data_[i]) << (8 * (i - byte));
    }
    return w >> (pos_ & 7);
  }

  const uint8_t* data_;
  uint64_t bits_;
  uint64_t pos_ = 0;
};

inline uint32_t floatBits(float f) { return std::bit_cast<uint32_t>(f); }
inline float bitsFloat(uint32_t u) { return std::bit_cast<float>(u); }

}  // namespace tern::compression::wire

namespace tern::compression::wire {

// The value a QSGD symbol stands for; shared by the compressor and the decoder so both compute
// the same float. |level| <= s keeps it within [-norm, norm], hence finite.
inline float qsgdValue(float norm, int32_t signed_level, uint32_t levels) {
  return norm * (float(signed_level) / float(levels));
}

// qsgdValue for every symbol (signed level + s) by table lookup once the table is no larger
// than the vector, so neither side divides per coordinate; same floats either way.
class QsgdTable {
 public:
  QsgdTable(float norm, uint32_t levels, size_t count) : norm_(norm), levels_(levels) {
    if (uint64_t(levels) * 2 + 1 <= count) {
      table_.resize(size_t(levels) * 2 + 1);
      for (size_t sym = 0; sym < table_.size(); ++sym)
        table_[sym] = qsgdValue(norm, int32_t(sym) - int32_t(levels), levels);
    }
  }
  float value(uint32_t symbol) const {
    return table_.empty() ? qsgdValue(norm_, int32_t(symbol) - int32_t(levels_), levels_)
                          : table_[symbol];
  }

 private:
  float norm_;
  uint32_t levels_;
  std::vector<float> table_;
};

}  // namespace tern::compression::wire
