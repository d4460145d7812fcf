#include "common/compression/wire_format.hpp"

#include <algorithm>
#include <limits>

namespace tern::compression::wire {

ValueCoding valueCodingOf(Scheme s) {
  switch (s) {
    case Scheme::kFp16:
      return ValueCoding::kFp16;
    case Scheme::kSq:
      return ValueCoding::kSigns;
    case Scheme::kQsgd:
      return ValueCoding::kQsgdLevels;
    default:
      return ValueCoding::kFp32;
  }
}

bool isDenseOnly(Scheme s) {
  return s == Scheme::kIdentity || s == Scheme::kFp16 || s == Scheme::kQsgd;
}

bool hasScale(Scheme s) { return s == Scheme::kSq || s == Scheme::kQsgd; }

unsigned qsgdBitsPerLevel(uint32_t levels) {
  // 2s + 1 symbols need bit_width(2s) bits.
  return unsigned(std::bit_width(uint64_t(levels) * 2));
}

uint64_t valueBytes(ValueCoding c, uint64_t count, uint32_t qsgd_levels) {
  switch (c) {
    case ValueCoding::kFp32:
      return count * 4;
    case ValueCoding::kFp16:
      return count * 2;
    case ValueCoding::kSigns:
      return (count + 7) / 8;
    case ValueCoding::kQsgdLevels:
      return (count * qsgdBitsPerLevel(qsgd_levels) + 7) / 8;
  }
  return 0;
}

size_t headerBytes(const Header& h) {
  size_t n = 5 + varintBytes(h.dim) + varintBytes(h.count);
  if (hasScale(h.scheme)) n += 4;
  if (h.scheme == Scheme::kQsgd) n += varintBytes(h.qsgd_levels);
  return n;
}

void writeHeader(std::vector<uint8_t>& out, const Header& h) {
  uint8_t buf[32];
  uint8_t* p = buf;
  *p++ = kMagic0;
  *p++ = kMagic1;
  *p++ = kVersion;
  *p++ = uint8_t(h.scheme);
  *p++ = uint8_t(h.coding);
  p = putVarint(p, h.dim);
  p = putVarint(p, h.count);
  if (hasScale(h.scheme)) {
    std::memcpy(p, &h.scale, 4);
    p += 4;
  }
  if (h.scheme == Scheme::kQsgd) p = putVarint(p, h.qsgd_levels);
  out.insert(out.end(), buf, p);
}

bool getVarint(const uint8_t*& p, const uint8_t* end, uint32_t& v) {
  uint32_t x = 0;
  for (unsigned i = 0; i < 5; ++i) {
    if (p == end) return false;
    const uint8_t b = *p++;
    if (i == 4 && b > 0x0F) return false;  // would exceed 32 bits
    x |= uint32_t(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) {
      if (b == 0 && i > 0) return false;  // redundant trailing group
      v = x;
      return true;
    }
  }
  return false;
}

namespace {

uint64_t riceBoundBits(uint32_t dim, uint32_t count, unsigned b) {
  return uint64_t(count) * (b + 1) + (uint64_t(dim - count) >> b);
}

unsigned riceBoundBest(uint32_t dim, uint32_t count) {
  unsigned best = 0;
  for (unsigned b = 1; b < 32; ++b)
    if (riceBoundBits(dim, count, b) < riceBoundBits(dim, count, best)) best = b;
  return best;
}

}  // namespace

IndexPlan planIndices(uint32_t dim, std::span<const uint32_t> idx) {
  const size_t count = idx.size();
  if (count == dim) return {IndexCoding::kDense, 0, 0};
  if (count == 0) return {IndexCoding::kDeltaVarint, 0, 0};

  // Rice parameters worth trying: the one minimising the worst-case bound (so the pick never
  // exceeds indexBytesBound) and the neighbourhood of log2(mean gap), where the optimum for
  // geometric gaps lies. Duplicates cost a little work, nothing else.
  constexpr unsigned kCandidates = 4;
  const int b_bound = int(riceBoundBest(dim, uint32_t(count)));
  const uint64_t mean_gap = (uint64_t(idx[count - 1]) + 1 - count) / count;
  const int b_mean = int(std::bit_width(mean_gap));
  const int wanted[kCandidates] = {b_bound, b_mean - 2, b_mean - 1, b_mean};
  unsigned b[kCandidates];
  for (unsigned c = 0; c < kCandidates; ++c) b[c] = unsigned(std::clamp(wanted[c], 0, 31));

  // One pass over the gaps for every candidate size at once, written so that it vectorises
  // (no carried state). Gaps sum to less than dim, so 32-bit quotient sums cannot overflow.
  auto varintLength = [](uint32_t gap) {
    return 1u + (gap >= (1u << 7)) + (gap >= (1u << 14)) + (gap >= (1u << 21)) +
           (gap >= (1u << 28));
  };
  uint32_t q0 = idx[0] >> b[0], q1 = idx[0] >> b[1], q2 = idx[0] >> b[2], q3 = idx[0] >> b[3];
  uint64_t varint = varintLength(idx[0]);
  const uint32_t* x = idx.data();
  for (size_t i = 1; i < count; ++i) {
    const uint32_t gap = x[i] - x[i - 1] - 1;
    q0 += gap >> b[0];
    q1 += gap >> b[1];
    q2 += gap >> b[2];
    q3 += gap >> b[3];
    varint += varintLength(gap);
  }
  const uint32_t quotients[kCandidates] = {q0, q1, q2, q3};

  IndexPlan best{IndexCoding::kBitmap, 0, (size_t(dim) + 7) / 8};
  if (varint < best.bytes) best = {IndexCoding::kDeltaVarint, 0, size_t(varint)};
  for (unsigned c = 0; c < kCandidates; ++c) {
    const uint64_t bits = uint64_t(quotients[c]) + uint64_t(count) * (b[c] + 1);
    const size_t bytes = 1 + size_t((bits + 7) / 8);
    if (bytes < best.bytes) best = {IndexCoding::kRice, uint8_t(b[c]), bytes};
  }
  return best;
}

size_t indexBytesBound(uint32_t dim, uint32_t count) {
  if (count >= dim) return 0;
  const size_t bitmap = (size_t(dim) + 7) / 8;
  if (count == 0) return 0;
  const unsigned b = riceBoundBest(dim, count);
  const size_t rice = 1 + size_t((riceBoundBits(dim, count, b) + 7) / 8);
  return std::min(bitmap, rice);
}

void writeIndices(uint8_t* out, const IndexPlan& plan, uint32_t dim,
                  std::span<const uint32_t> idx) {
  switch (plan.coding) {
    case IndexCoding::kDense:
      return;
    case IndexCoding::kDeltaVarint: {
      uint32_t prev_plus_one = 0;
      for (uint32_t i : idx) {
        out = putVarint(out, i - prev_plus_one);
        prev_plus_one = i + 1;
      }
      return;
    }
    case IndexCoding::kBitmap: {
      std::memset(out, 0, (size_t(dim) + 7) / 8);
      for (uint32_t i : idx) out[i >> 3] |= uint8_t(1u << (i & 7));
      return;
    }
    case IndexCoding::kRice: {
      const unsigned b = plan.rice_bits;
      const uint32_t mask = (uint32_t(1) << b) - 1;
      *out++ = uint8_t(b);
      BitWriter w(out);
      uint32_t prev_plus_one = 0;
      for (uint32_t i : idx) {
        const uint32_t gap = i - prev_plus_one;
        prev_plus_one = i + 1;
        const uint32_t q = gap >> b;
        if (q + 1 + b <= 32) {
          // Unary zeros, the terminating one, then the remainder, in one write.
          w.put(((uint64_t(gap & mask) << 1) | 1u) << q, q + 1 + b);
        } else {
          w.zeros(q);
          w.put(1, 1);
          w.put(gap & mask, b);
        }
      }
      w.finish();
      return;
    }
  }
}

void packFixed(const uint32_t* symbols, size_t n, unsigned width, uint8_t* out) {
  const uint64_t bytes = (uint64_t(n) * width + 7) / 8;
  uint64_t acc = 0;
  unsigned fill = 0;
  size_t o = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t v = symbols[i];
    acc |= v << fill;
    fill += width;
    if (fill >= 64) {  // periodic in i, so it predicts well
      std::memcpy(out + o, &acc, 8);
      o += 8;
      fill -= 64;
      acc = fill == 0 ? 0 : v >> (width - fill);
    }
  }
  for (; o < bytes; ++o, acc >>= 8) out[o] = uint8_t(acc);
}

void unpackFixed(const uint8_t* in, size_t n, unsigned width, uint32_t* symbols) {
  const uint64_t bytes = (uint64_t(n) * width + 7) / 8;
  const uint64_t mask = (uint64_t(1) << width) - 1;
  size_t i = 0;
  // Fast path: an unaligned 8-byte load holds any symbol (width <= 32, shift <= 7) while eight
  // bytes remain from its first byte.
  for (; i < n; ++i) {
    const uint64_t bit = uint64_t(i) * width;
    if ((bit >> 3) + 8 > bytes) break;
    uint64_t w;
    std::memcpy(&w, in + (bit >> 3), 8);
    symbols[i] = uint32_t((w >> (bit & 7)) & mask);
  }
  for (; i < n; ++i) {
    const uint64_t bit = uint64_t(i) * width;
    uint64_t w = 0;
    for (uint64_t b = bit >> 3; b < bytes && b < (bit >> 3) + 8; ++b)
      w |= uint64_t(in[b]) << (8 * (b - (bit >> 3)));
    symbols[i] = uint32_t((w >> (bit & 7)) & mask);
  }
}

}  // namespace tern::compression::wire
