#include "common/compression/codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "common/compression/compressor_support.hpp"
#include "common/compression/half_float.hpp"
#include "common/compression/message_encoding.hpp"
#include "common/compression/wire_format.hpp"
#include "common/util/float_passes.hpp"

namespace tern::compression {

namespace {

using namespace wire;

DecodeResult fail(std::string why) {
  DecodeResult r;
  r.error = std::move(why);
  return r;
}

// Each reader consumes exactly [p, end) or reports why not. `out` is sized by the caller only
// after the section's length has been shown to hold `count` entries.
const char* readVarintIndices(const uint8_t* p, const uint8_t* end, uint32_t dim, uint32_t count,
                              std::vector<uint32_t>& out) {
  if (uint64_t(end - p) < count) return "index section too short for its count";
  out.resize(count);
  uint64_t next = 0;  // smallest index allowed next
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t gap;
    if (!getVarint(p, end, gap)) return "bad varint in index section";
    const uint64_t idx = next + gap;
    if (idx >= dim) return "index out of range";
    out[i] = uint32_t(idx);
    next = idx + 1;
  }
  if (p != end) return "trailing bytes in index section";
  return nullptr;
}

const char* readBitmapIndices(const uint8_t* p, const uint8_t* end, uint32_t dim, uint32_t count,
                              std::vector<uint32_t>& out) {
  const size_t nbytes = (size_t(dim) + 7) / 8;
  if (size_t(end - p) != nbytes) return "bitmap size does not match dimension";
  if (dim % 8 != 0 && (p[nbytes - 1] >> (dim % 8)) != 0) return "bitmap padding bits set";
  uint64_t pop = 0;
  for (size_t i = 0; i < nbytes; ++i) pop += unsigned(std::popcount(p[i]));
  if (pop != count) return "bitmap population does not match count";
  out.resize(count);
  size_t o = 0;
  size_t i = 0;
  for (; i + 8 <= nbytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    while (w != 0) {
      out[o++] = uint32_t(i * 8 + unsigned(std::countr_zero(w)));
      w &= w - 1;
    }
  }
  for (; i < nbytes; ++i) {
    unsigned w = p[i];
    while (w != 0) {
      out[o++] = uint32_t(i * 8 + unsigned(std::countr_zero(w)));
      w &= w - 1;
    }
  }
  return nullptr;
}

const char* readRiceIndices(const uint8_t* p, const uint8_t* end, uint32_t dim, uint32_t count,
                            std::vector<uint32_t>& out) {
  if (p == end) return "missing Rice parameter";
  const unsigned b = *p++;
  if (b > 31) return "Rice parameter out of range";
  // Every gap takes at least b + 1 bits: check before sizing the output.
  const uint64_t bits = uint64_t(end - p) * 8;
  if (uint64_t(count) * (b + 1) > bits) return "index section too short for its count";
  out.resize(count);
  BitReader r(p, size_t(end - p));
  const uint64_t max_quotient = uint64_t(dim - 1) >> b;
  uint64_t next = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t q;
    uint32_t rem;
    if (!r.unary(max_quotient, q)) return "bad unary code in index section";
    if (!r.get(b, rem)) return "index section truncated";
    const uint64_t idx = next + ((q << b) | rem);
    if (idx >= dim) return "index out of range";
    out[i] = uint32_t(idx);
    next = idx + 1;
  }
  if (r.size() - r.position() >= 8) return "trailing bytes in index section";
  if (!r.restIsZero()) return "index padding bits set";
  return nullptr;
}

// Reads the header from p (at least 5 bytes before end), leaving p at the index section.
const char* readHeader(const uint8_t*& p, const uint8_t* end, const DecodeLimits& limits,
                       Header& h) {
  if (p[0] != kMagic0 || p[1] != kMagic1) return "bad magic";
  if (p[2] != kVersion) return "unsupported format version";
  if (p[3] == 0 || p[3] > kMaxScheme) return "unknown scheme";
  if (p[4] > kMaxIndexCoding) return "unknown index coding";
  h.scheme = Scheme(p[3]);
  h.coding = IndexCoding(p[4]);
  p += 5;
  if (!getVarint(p, end, h.dim)) return "bad dimension";
  if (!getVarint(p, end, h.count)) return "bad count";
  if (h.dim == 0) return "zero dimension";
  if (h.dim > limits.max_dim) return "dimension above the configured limit";
  if (limits.expected_dim != 0 && h.dim != limits.expected_dim)
    return "dimension differs from the model's";
  if (h.count > h.dim) return "count exceeds dimension";
  if (isDenseOnly(h.scheme) && h.coding != IndexCoding::kDense)
    return "scheme requires dense coding";
  if (h.coding == IndexCoding::kDense && h.count != h.dim) return "dense message with count != dim";
  if (hasScale(h.scheme)) {
    if (end - p < 4) return "truncated scale";
    std::memcpy(&h.scale, p, 4);
    p += 4;
    if (!std::isfinite(h.scale) || h.scale < 0.0f) return "scale not finite and non-negative";
  }
  if (h.scheme == Scheme::kQsgd) {
    if (!getVarint(p, end, h.qsgd_levels)) return "bad QSGD level count";
    if (h.qsgd_levels == 0 || h.qsgd_levels > kMaxQsgdLevels)
      return "QSGD level count out of range";
  }
  return nullptr;
}

// The index section [p, end) in the header's coding.
const char* readIndices(const uint8_t* p, const uint8_t* end, const Header& h,
                        std::vector<uint32_t>& out) {
  switch (h.coding) {
    case IndexCoding::kDense:
      return p != end ? "unexpected index section in dense message" : nullptr;
    case IndexCoding::kDeltaVarint:
      return readVarintIndices(p, end, h.dim, h.count, out);
    case IndexCoding::kBitmap:
      return readBitmapIndices(p, end, h.dim, h.count, out);
    case IndexCoding::kRice:
      return readRiceIndices(p, end, h.dim, h.count, out);
  }
  return nullptr;
}

// Each value reader fills `out` (sized to the count) from the value section at v.
const char* readFp32Values(const uint8_t* v, std::vector<float>& out) {
  if (!out.empty()) std::memcpy(out.data(), v, out.size() * 4);
  // One vectorisable pass: not finite means an all-ones exponent.
  uint32_t bad = 0;
  for (float x : out) bad |= nonFiniteBit(x);
  return bad ? "non-finite value" : nullptr;
}

const char* readFp16Values(const uint8_t* v, std::vector<float>& out) {
  // Block by block through a small buffer: vectorised checks and conversions without a large
  // temporary.
  constexpr uint32_t kBlock = 4096;
  uint16_t halves[kBlock];
  const auto count = uint32_t(out.size());
  for (uint32_t base = 0; base < count; base += kBlock) {
    const uint32_t n = std::min(kBlock, count - base);
    std::memcpy(halves, v + size_t(base) * 2, size_t(n) * 2);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; ++i) bad |= uint32_t(!halfIsFinite(halves[i]));
    if (bad) return "non-finite value";
    halvesToFloats(halves, n, out.data() + base);
  }
  return nullptr;
}

const char* readSignValues(const uint8_t* v, float scale, std::vector<float>& out) {
  const auto count = uint32_t(out.size());
  if (count % 8 != 0 && (v[count / 8] >> (count % 8)) != 0) return "sign padding bits set";
  for (uint32_t i = 0; i < count; ++i) out[i] = ((v[i >> 3] >> (i & 7)) & 1u) ? -scale : scale;
  return nullptr;
}

const char* readQsgdValues(const uint8_t* v, uint64_t vbytes, const Header& h,
                           std::vector<float>& out) {
  const uint32_t count = h.count;
  const unsigned w = qsgdBitsPerLevel(h.qsgd_levels);
  const uint64_t used_bits = uint64_t(count) * w;
  if (used_bits % 8 != 0 && (v[vbytes - 1] >> (used_bits % 8)) != 0) return "QSGD padding bits set";
  const QsgdTable table(h.scale, h.qsgd_levels, count);
  constexpr uint32_t kBlock = 4096;  // kBlock * w bits is a whole number of bytes
  uint32_t symbols[kBlock];
  for (uint32_t base = 0; base < count; base += kBlock) {
    const uint32_t n = std::min(kBlock, count - base);
    unpackFixed(v + size_t(base / 8) * w, n, w, symbols);
    uint32_t top = 0;
    for (uint32_t i = 0; i < n; ++i) top = std::max(top, symbols[i]);
    if (top > 2 * h.qsgd_levels) return "QSGD level out of range";
    for (uint32_t i = 0; i < n; ++i) out[base + i] = table.value(symbols[i]);
  }
  return nullptr;
}

// The value section at v (vbytes long) in the scheme's value coding; out holds h.count values.
const char* readValues(const uint8_t* v, uint64_t vbytes, const Header& h,
                       std::vector<float>& out) {
  switch (valueCodingOf(h.scheme)) {
    case ValueCoding::kFp32:
      return readFp32Values(v, out);
    case ValueCoding::kFp16:
      return readFp16Values(v, out);
    case ValueCoding::kSigns:
      return readSignValues(v, h.scale, out);
    case ValueCoding::kQsgdLevels:
      return readQsgdValues(v, vbytes, h, out);
  }
  return nullptr;
}

}  // namespace

DecodeResult decode(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  SparseGradient fresh;
  return decode(bytes, limits, fresh);
}

DecodeResult decode(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                    SparseGradient& scratch) {
  if (bytes.size() > limits.max_bytes) return fail("message larger than the configured limit");
  const uint8_t* p = bytes.data();
  const uint8_t* const end = p + bytes.size();
  if (bytes.size() < 5) return fail("message shorter than its header");
  Header h;
  if (const char* err = readHeader(p, end, limits, h)) return fail(err);

  const size_t header_bytes = size_t(p - bytes.data());
  const uint64_t vbytes = valueBytes(valueCodingOf(h.scheme), h.count, h.qsgd_levels);
  if (uint64_t(end - p) < vbytes) return fail("message shorter than its value section");
  const uint8_t* const index_end = end - vbytes;

  SparseGradient& g = scratch;
  g.dim = h.dim;
  g.indices.clear();
  if (const char* err = readIndices(p, index_end, h, g.indices)) return fail(err);
  // Every value is written below: a scratch already of this size is not cleared first (a
  // model-sized pass for every dense message).
  g.values.resize(h.count);
  if (const char* err = readValues(index_end, vbytes, h, g.values)) return fail(err);
  if (!g.isDense() && g.indices.size() != g.values.size()) return fail("internal size mismatch");

  DecodeResult res;
  res.value = std::move(g);
  res.header_bytes = header_bytes;
  return res;
}

std::optional<DenseFp32View> denseFp32View(std::span<const uint8_t> bytes,
                                           const DecodeLimits& limits) {
  if (bytes.size() > limits.max_bytes || bytes.size() < 5) return std::nullopt;
  const uint8_t* p = bytes.data();
  const uint8_t* const end = p + bytes.size();
  Header h;
  if (readHeader(p, end, limits, h) != nullptr) return std::nullopt;
  if (h.coding != IndexCoding::kDense || valueCodingOf(h.scheme) != ValueCoding::kFp32) {
    return std::nullopt;
  }
  // Dense: no index section, so the values are exactly the rest.
  if (uint64_t(end - p) != valueBytes(ValueCoding::kFp32, h.count, 0)) return std::nullopt;
  return DenseFp32View{p, h.count, size_t(p - bytes.data())};
}

bool addDenseIfFinite(const DenseFp32View& view, float weight, std::span<float> out) {
  if (out.size() != view.count) return false;
  const uint8_t* v = view.values;
  // One vectorized pass to check (no early exit), then one to add: nothing changes unless all is
  // well.
  uint32_t bad = 0;
  for (size_t j = 0; j < out.size(); ++j) {
    float x;
    std::memcpy(&x, v + j * 4, 4);
    bad |= nonFiniteBit(x) | nonFiniteBit(out[j] + weight * x);
  }
  if (bad) return false;
  for (size_t j = 0; j < out.size(); ++j) {
    float x;
    std::memcpy(&x, v + j * 4, 4);
    out[j] += weight * x;
  }
  return true;
}

std::vector<uint8_t> encodeUpdate(const SparseGradient& update) {
  std::vector<uint8_t> out;
  encodeUpdateInto(update, out);
  return out;
}

void encodeUpdateInto(const SparseGradient& update, std::vector<uint8_t>& out) {
  if (update.dim == 0) throw std::invalid_argument("encodeUpdate: zero dimension");
  // No receiver accepts a non-finite value, dense or sparse.
  if (!detail::allFinite(update.values))
    throw std::invalid_argument("encodeUpdate: non-finite value");
  if (update.isDense()) {
    wire::encodeFp32Into(out, Scheme::kUpdate, update.dim, {}, update.values);
    return;
  }
  if (update.indices.size() != update.values.size())
    throw std::invalid_argument("encodeUpdate: indices and values differ in length");
  for (size_t i = 0; i < update.indices.size(); ++i) {
    if (update.indices[i] >= update.dim || (i > 0 && update.indices[i] <= update.indices[i - 1]))
      throw std::invalid_argument("encodeUpdate: indices must be strictly increasing and < dim");
  }
  wire::encodeFp32Into(out, Scheme::kUpdate, update.dim, update.indices, update.values);
}

}  // namespace tern::compression
