#include <doctest/doctest.h>

#include <cstring>
#include <limits>

#include "common/compression/codec.hpp"
#include "common/compression/wire_format.hpp"
#include "test_support.hpp"

using namespace tern::compression;
using namespace tern::compression::testing;
namespace wire = tern::compression::wire;

namespace {

std::vector<uint8_t> header(wire::Scheme s, wire::IndexCoding c, uint32_t dim, uint32_t count,
                            float scale = 1.0f, uint32_t levels = 0) {
  wire::Header h;
  h.scheme = s;
  h.coding = c;
  h.dim = dim;
  h.count = count;
  h.scale = scale;
  h.qsgd_levels = levels;
  std::vector<uint8_t> out;
  wire::writeHeader(out, h);
  return out;
}

void appendFloat(std::vector<uint8_t>& out, float x) {
  uint8_t b[4];
  std::memcpy(b, &x, 4);
  out.insert(out.end(), b, b + 4);
}

bool rejected(const std::vector<uint8_t>& bytes, DecodeLimits limits = {}) {
  const DecodeResult r = decode(bytes, limits);
  return !r.value && !r.error.empty();
}

// A valid delta-varint top-k message: dim 100, indices {3, 7}.
std::vector<uint8_t> validVarintMessage() {
  auto m = header(wire::Scheme::kTopK, wire::IndexCoding::kDeltaVarint, 100, 2);
  m.push_back(3);
  m.push_back(3);
  appendFloat(m, 1.0f);
  appendFloat(m, -2.0f);
  return m;
}

std::vector<std::vector<uint8_t>> validMessagesOfEveryScheme() {
  std::vector<std::vector<uint8_t>> out;
  for (const std::string& name : compressorNames()) {
    CompressorSpec spec;
    spec.name = name;
    spec.threshold = 1.0;
    spec.qsgd_levels = 5;
    auto c = makeCompressor(spec);
    tern::Rng rng(3);
    for (size_t d : {1, 7, 300, 5000}) {
      const auto g = gaussianGradient(d, d + 17);
      for (uint32_t level : {uint32_t(1), uint32_t(d / 20 + 1), uint32_t(d / 2 + 1), uint32_t(d)})
        out.push_back(c->compress(g, level, rng).bytes);
    }
  }
  out.push_back(encodeUpdate(SparseGradient{50, {1, 2, 40}, {1.0f, 2.0f, 3.0f}}));
  return out;
}

}  // namespace

TEST_CASE("a hand-built valid message decodes to the expected gradient") {
  const DecodeResult r = decode(validVarintMessage(), DecodeLimits{});
  REQUIRE_MESSAGE(r.value.has_value(), r.error);
  CHECK(r.value->indices == std::vector<uint32_t>{3, 7});
  CHECK(r.value->values == std::vector<float>{1.0f, -2.0f});
}

TEST_CASE("the decoder rejects bad magic, version, scheme and index coding") {
  for (size_t at : {0, 1, 2, 3, 4}) {
    auto m = validVarintMessage();
    m[at] = 0xEE;
    CHECK(rejected(m));
  }
  auto m = validVarintMessage();
  m[3] = 0;
  CHECK(rejected(m));
  CHECK(rejected({}));
}

TEST_CASE("the decoder rejects indices that are out of range or not strictly increasing") {
  auto m = header(wire::Scheme::kTopK, wire::IndexCoding::kDeltaVarint, 10, 2);
  m.push_back(9);
  m.push_back(0);  // 9, then 10: out of range
  appendFloat(m, 1.0f);
  appendFloat(m, 1.0f);
  CHECK(rejected(m));
  // A bitmap cannot repeat an index, but its population must match the count.
  auto b = header(wire::Scheme::kTopK, wire::IndexCoding::kBitmap, 10, 2);
  b.push_back(0b00000111);
  b.push_back(0);
  appendFloat(b, 1.0f);
  appendFloat(b, 1.0f);
  CHECK(rejected(b));
  // Padding bits past the dimension are not indices.
  auto p = header(wire::Scheme::kTopK, wire::IndexCoding::kBitmap, 10, 2);
  p.push_back(0b00000001);
  p.push_back(0b00000100);
  appendFloat(p, 1.0f);
  appendFloat(p, 1.0f);
  CHECK(rejected(p));
}

TEST_CASE("the decoder rejects count above dimension and dense messages with count != dim") {
  auto m = header(wire::Scheme::kTopK, wire::IndexCoding::kDeltaVarint, 2, 3);
  for (int i = 0; i < 3; ++i) m.push_back(0);
  for (int i = 0; i < 3; ++i) appendFloat(m, 1.0f);
  CHECK(rejected(m));
  auto d = header(wire::Scheme::kIdentity, wire::IndexCoding::kDense, 3, 2);
  appendFloat(d, 1.0f);
  appendFloat(d, 1.0f);
  CHECK(rejected(d));
  auto s = header(wire::Scheme::kIdentity, wire::IndexCoding::kDeltaVarint, 2, 2);
  s.push_back(0);
  s.push_back(0);
  appendFloat(s, 1.0f);
  appendFloat(s, 1.0f);
  CHECK(rejected(s));
}

TEST_CASE("the decoder rejects trailing bytes and non-canonical varints") {
  auto m = validVarintMessage();
  m.push_back(0);
  CHECK(rejected(m));
  // Dimension 100 spelled with a redundant zero group.
  std::vector<uint8_t> nc{'T', 'G', 1, uint8_t(wire::Scheme::kTopK), 1, 0x80 | 100, 0x00, 0};
  CHECK(rejected(nc));
  std::vector<uint8_t> big{'T',  'G',  1, uint8_t(wire::Scheme::kTopK), 1, 0xFF, 0xFF, 0xFF,
                           0xFF, 0x1F, 0};
  CHECK(rejected(big));
}

TEST_CASE("the decoder rejects non-finite values and scales") {
  for (float bad :
       {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    auto m = header(wire::Scheme::kIdentity, wire::IndexCoding::kDense, 2, 2);
    appendFloat(m, 1.0f);
    appendFloat(m, bad);
    CHECK(rejected(m));
    auto sq = header(wire::Scheme::kSq, wire::IndexCoding::kDeltaVarint, 4, 1, bad);
    sq.push_back(2);
    sq.push_back(0);
    CHECK(rejected(sq));
  }
  auto neg = header(wire::Scheme::kSq, wire::IndexCoding::kDeltaVarint, 4, 1, -1.0f);
  neg.push_back(2);
  neg.push_back(0);
  CHECK(rejected(neg));
  auto h = header(wire::Scheme::kFp16, wire::IndexCoding::kDense, 1, 1);
  h.push_back(0x00);
  h.push_back(0x7C);  // fp16 infinity
  CHECK(rejected(h));
}

TEST_CASE("the decoder enforces the configured limits") {
  const auto m = validVarintMessage();
  DecodeLimits small_dim;
  small_dim.max_dim = 99;
  CHECK(rejected(m, small_dim));
  DecodeLimits small_bytes;
  small_bytes.max_bytes = m.size() - 1;
  CHECK(rejected(m, small_bytes));
  DecodeLimits other_model;
  other_model.expected_dim = 101;
  CHECK(rejected(m, other_model));
  DecodeLimits exact;
  exact.max_dim = 100;
  exact.max_bytes = m.size();
  exact.expected_dim = 100;
  CHECK_FALSE(rejected(m, exact));
}

TEST_CASE("a huge claimed count in a short message is rejected before any allocation") {
  auto m = header(wire::Scheme::kTopK, wire::IndexCoding::kRice, 1u << 28, (1u << 28) - 1);
  m.push_back(0);
  CHECK(rejected(m));
  auto v = header(wire::Scheme::kSq, wire::IndexCoding::kDeltaVarint, 1u << 28, 1u << 27);
  for (int i = 0; i < 100; ++i) v.push_back(0);
  CHECK(rejected(v));
}

TEST_CASE("every truncation of a valid message is rejected with a reason") {
  size_t accepted = 0, total = 0;
  for (const auto& msg : validMessagesOfEveryScheme()) {
    // Long messages: every cut near both ends and a stride through the middle.
    for (size_t len = 0; len < msg.size(); ++len) {
      if (len > 64 && len + 64 < msg.size() && len % 97 != 0) continue;
      const DecodeResult r = decode(std::span(msg.data(), len), DecodeLimits{});
      ++total;
      if (r.value) {
        ++accepted;
        CHECK(wellFormed(*r.value));
      } else {
        CHECK_FALSE(r.error.empty());
      }
    }
  }
  // A message's size follows from its header and trailing bytes are refused, so a cut message
  // is never the message: any accepted cut decodes something that was not sent.
  CHECK(total > 1000);
  CHECK(accepted == 0);
}

TEST_CASE("random byte mutations of valid messages never yield a malformed gradient") {
  tern::Rng rng(2024);
  const auto msgs = validMessagesOfEveryScheme();
  size_t rejected_count = 0, total = 0;
  for (int round = 0; round < 40; ++round) {
    for (const auto& msg : msgs) {
      auto m = msg;
      const int flips = 1 + int(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        const size_t at = rng() % m.size();
        if (rng() % 2)
          m[at] ^= uint8_t(1u << (rng() % 8));
        else
          m[at] = uint8_t(rng());
      }
      if (rng() % 8 == 0) m.push_back(uint8_t(rng()));
      const DecodeResult r = decode(m, DecodeLimits{});
      ++total;
      if (r.value)
        CHECK(wellFormed(*r.value));
      else
        ++rejected_count;
    }
  }
  CHECK(rejected_count > 0);
  CHECK(total > 1000);
}

namespace {

// Whether decode() takes the message, or refuses it only for a non-finite value (which the
// dense view leaves to its caller's pass), and it is a dense message of fp32 values.
bool decodesAsDenseFp32(const std::vector<uint8_t>& m, const DecodeLimits& limits) {
  if (m.size() < 5 || m[4] != uint8_t(wire::IndexCoding::kDense)) return false;
  if (m[3] == 0 || m[3] > uint8_t(wire::Scheme::kUpdate)) return false;
  if (wire::valueCodingOf(wire::Scheme(m[3])) != wire::ValueCoding::kFp32) return false;
  const DecodeResult r = decode(m, limits);
  return r.value.has_value() || r.error == "non-finite value";
}

}  // namespace

TEST_CASE("the dense view takes exactly the dense fp32 messages the decoder takes, same values") {
  // Reference: decode(). Valid messages of every scheme, their truncations and mutations.
  tern::Rng rng(77);
  DecodeLimits limits;
  size_t viewed = 0, total = 0;
  for (const auto& msg : validMessagesOfEveryScheme()) {
    std::vector<std::vector<uint8_t>> variants{msg,
                                               std::vector<uint8_t>(msg.begin(), msg.end() - 1)};
    for (int i = 0; i < 8; ++i) {
      auto m = msg;
      m[rng() % m.size()] ^= uint8_t(1u << (rng() % 8));
      variants.push_back(m);
    }
    auto longer = msg;
    longer.push_back(0);
    variants.push_back(longer);
    for (const auto& m : variants) {
      ++total;
      const auto view = denseFp32View(m, limits);
      REQUIRE(view.has_value() == decodesAsDenseFp32(m, limits));
      if (!view) continue;
      ++viewed;
      const DecodeResult r = decode(m, limits);
      if (!r.value) continue;  // a non-finite value: checked by the pass below
      REQUIRE(r.value->values.size() == view->count);
      CHECK(std::memcmp(r.value->values.data(), view->values, size_t(view->count) * 4) == 0);
      CHECK(view->header_bytes == r.header_bytes);
    }
  }
  CHECK(viewed > 10);
  CHECK(total > 300);
  DecodeLimits small;
  small.expected_dim = 4999;
  for (const auto& msg : validMessagesOfEveryScheme()) CHECK_FALSE(denseFp32View(msg, small));
}

TEST_CASE("adding a dense view changes the model as decoding and adding does, or not at all") {
  const auto g = gaussianGradient(1001, 5);
  const auto msg = encodeUpdate(SparseGradient{1001, {}, g});
  const auto view = denseFp32View(msg, DecodeLimits{});
  REQUIRE(view.has_value());
  std::vector<float> model = gaussianGradient(1001, 9), reference = model;
  addScaled(*decode(msg, DecodeLimits{}).value, 0.5f, reference);
  CHECK(addDenseIfFinite(*view, 0.5f, model));
  CHECK(model == reference);

  // A NaN in the frame, or a sum that overflows: refused, the model as it was.
  auto bad = msg;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bad.data() + bad.size() - 4, &nan, 4);
  const auto bad_view = denseFp32View(bad, DecodeLimits{});
  REQUIRE(bad_view.has_value());
  CHECK_FALSE(addDenseIfFinite(*bad_view, 1.0f, model));
  CHECK(model == reference);
  std::vector<float> huge(1001, std::numeric_limits<float>::max());
  const auto before = huge;
  CHECK_FALSE(addDenseIfFinite(*view, 1e38f, huge));
  CHECK(huge == before);
  std::vector<float> other_size(1000, 0.0f);
  CHECK_FALSE(addDenseIfFinite(*view, 1.0f, other_size));
}
