#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "test_support.hpp"

using namespace tern::compression;
using namespace tern::compression::testing;

namespace {

CompressorSpec specFor(const std::string& name) {
  CompressorSpec s;
  s.name = name;
  s.threshold = 0.8;
  s.qsgd_levels = 7;
  return s;
}

// compress, then decode the bytes: the result must be exactly `decoded`, well formed, and no
// larger than encodedBytes promised.
void checkRoundTrip(Compressor& c, const std::vector<float>& g, uint32_t level, uint64_t seed) {
  tern::Rng rng(seed);
  const Compressed out = c.compress(g, level, rng);
  DecodeLimits limits;
  limits.expected_dim = uint32_t(g.size());
  const DecodeResult back = decode(out.bytes, limits);
  REQUIRE_MESSAGE(back.value.has_value(), back.error);
  CHECK(sameGradient(*back.value, out.decoded));
  CHECK(wellFormed(*back.value));
  CHECK(back.value->dim == g.size());
  if (c.hasLevel() && c.name() != "stochastic")
    CHECK(out.bytes.size() <= c.encodedBytes(uint32_t(g.size()), level));
}

}  // namespace

TEST_CASE("every compressor reports the kind its name parses to") {
  for (const std::string& name : compressorNames()) {
    const auto compressor = makeCompressor(specFor(name));
    CHECK(compressor->name() == name);
    REQUIRE(compressorKindNamed(name).has_value());
    CHECK(compressor->kind() == *compressorKindNamed(name));
  }
  CHECK_FALSE(compressorKindNamed("top-k").has_value());
}

TEST_CASE("every compressor's message decodes to exactly its decoded vector") {
  for (const std::string& name : compressorNames()) {
    CAPTURE(name);
    auto c = makeCompressor(specFor(name));
    for (size_t d : {1, 2, 9, 64, 1000, 100000}) {
      CAPTURE(d);
      const auto g = gaussianGradient(d, 100 + d);
      for (uint32_t level : {uint32_t(1), uint32_t(d / 10 + 1), uint32_t(d / 2 + 1), uint32_t(d)})
        checkRoundTrip(*c, g, level, d + level);
    }
  }
}

TEST_CASE("every compressor round-trips all-zero, tied and signed-zero gradients") {
  for (const std::string& name : compressorNames()) {
    CAPTURE(name);
    auto c = makeCompressor(specFor(name));
    for (size_t d : {1, 8, 333}) {
      const std::vector<float> zeros(d, 0.0f);
      const auto tied = tiedGradient(d, d);
      for (uint32_t level : {uint32_t(1), uint32_t(d / 3 + 1), uint32_t(d)}) {
        checkRoundTrip(*c, zeros, level, 1);
        checkRoundTrip(*c, tied, level, 2);
      }
    }
  }
}

TEST_CASE("every compressor round-trips gradients whose norm is tiny or subnormal") {
  // levels / norm overflows float below a norm of about levels / FLT_MAX; qsgd's symbols were
  // then out of range (a crash with the lookup table, a wrong vector without it).
  for (const std::string& name : compressorNames()) {
    CAPTURE(name);
    auto c = makeCompressor(specFor(name));
    for (float scale : {1e-30f, 1e-38f, 1e-40f, 1e-45f}) {
      for (size_t d : {1, 8, 1000}) {
        CAPTURE(scale);
        CAPTURE(d);
        std::vector<float> g(d, 0.0f);
        for (size_t j = 0; j < d; j += 3) g[j] = (j % 2 ? -scale : scale) * float(1 + j % 5);
        for (uint32_t level : {uint32_t(1), uint32_t(d)}) checkRoundTrip(*c, g, level, d + level);
      }
    }
  }
}

TEST_CASE("every compressor round-trips a large gradient at a small level") {
  const auto g = gaussianGradient(2000000, 77);
  for (const std::string& name : compressorNames()) {
    CAPTURE(name);
    auto c = makeCompressor(specFor(name));
    checkRoundTrip(*c, g, 2000, 5);
  }
}

TEST_CASE("top-k keeps exactly the brute-force top k with their original values") {
  auto c = makeCompressor(specFor("topk"));
  tern::Rng rng(1);
  for (size_t d : {1, 100, 100000}) {
    const auto g = gaussianGradient(d, d * 3);
    for (size_t k : {size_t(1), d / 7 + 1, d}) {
      const Compressed out = c->compress(g, uint32_t(k), rng);
      const auto want = bruteForceTopK(g, k);
      std::vector<float> dense(d, 0.0f);
      for (uint32_t j : want) dense[j] = g[j];
      CHECK(bitwiseEqual(toDense(out.decoded), dense));
      CHECK(out.decoded.nonZeros() == k);
    }
  }
}

TEST_CASE("identity sends the gradient bit for bit") {
  auto c = makeCompressor(specFor("identity"));
  tern::Rng rng(1);
  const auto g = gaussianGradient(1234, 9);
  const Compressed out = c->compress(g, 0, rng);
  CHECK(out.decoded.isDense());
  CHECK(bitwiseEqual(out.decoded.values, g));
  CHECK(out.bytes.size() == c->encodedBytes(1234, 0));
}

TEST_CASE("compressors refuse empty and non-finite gradients") {
  for (const std::string& name : compressorNames()) {
    CAPTURE(name);
    auto c = makeCompressor(specFor(name));
    tern::Rng rng(1);
    CHECK_THROWS_AS(c->compress(std::vector<float>{}, 1, rng), std::invalid_argument);
    std::vector<float> g(10, 1.0f);
    g[3] = std::numeric_limits<float>::infinity();
    CHECK_THROWS_AS(c->compress(g, 10, rng), std::invalid_argument);
  }
}

TEST_CASE("makeCompressor rejects unknown names") {
  CompressorSpec s;
  s.name = "zip";
  CHECK_THROWS_AS(makeCompressor(s), std::invalid_argument);
  for (const std::string& name : compressorNames())
    CHECK(makeCompressor(specFor(name))->name() == name);
}

TEST_CASE("encodeUpdate round-trips sparse and dense updates") {
  const SparseGradient sparse{1000, {0, 5, 999}, {1.5f, -2.0f, 3.25f}};
  const SparseGradient empty{10, {}, {}};
  const SparseGradient dense{4, {}, {1.0f, 2.0f, -3.0f, 0.0f}};
  for (const SparseGradient& u : {sparse, empty, dense}) {
    const DecodeResult back = decode(encodeUpdate(u), DecodeLimits{});
    REQUIRE_MESSAGE(back.value.has_value(), back.error);
    CHECK(sameGradient(*back.value, u));
  }
}

TEST_CASE("encodeUpdate refuses malformed updates") {
  CHECK_THROWS_AS(encodeUpdate(SparseGradient{10, {3, 3}, {1.0f, 2.0f}}), std::invalid_argument);
  CHECK_THROWS_AS(encodeUpdate(SparseGradient{10, {10}, {1.0f}}), std::invalid_argument);
  CHECK_THROWS_AS(encodeUpdate(SparseGradient{0, {}, {}}), std::invalid_argument);
  // Non-finite values, sparse and dense alike.
  const float inf = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(encodeUpdate(SparseGradient{10, {2}, {inf}}), std::invalid_argument);
  CHECK_THROWS_AS(encodeUpdate(SparseGradient{3, {}, {0.0f, -inf, 1.0f}}), std::invalid_argument);
  CHECK_THROWS_AS(encodeUpdate(SparseGradient{2, {}, {std::nanf(""), 1.0f}}),
                  std::invalid_argument);
}

TEST_CASE("decode reports the header's length: magic, version, scheme, coding, dim, count, scale") {
  // Written out from the format: 5 fixed bytes, LEB128 dim and count, a float scale for S+Q,
  // a LEB128 level count for QSGD.
  auto leb = [](uint32_t v) { return v < 128 ? 1u : v < 16384 ? 2u : v < 2097152 ? 3u : 4u; };
  for (const std::string name : {"topk", "sq", "identity", "qsgd"}) {
    for (size_t d : {10u, 300u, 20000u}) {
      CAPTURE(name);
      CAPTURE(d);
      auto c = makeCompressor(specFor(name));
      const auto g = gaussianGradient(d, 7);
      tern::Rng rng(1);
      const Compressed out = c->compress(g, uint32_t(d / 10 + 1), rng);
      const DecodeResult back = decode(out.bytes, DecodeLimits{});
      REQUIRE(back.value.has_value());
      const uint32_t count = uint32_t(back.value->nonZeros());
      size_t expected = 5 + leb(uint32_t(d)) + leb(count);
      if (name == "sq" || name == "qsgd") expected += 4;
      if (name == "qsgd") expected += leb(7);
      CHECK(back.header_bytes == expected);
    }
  }
}

TEST_CASE("decoding into a scratch gradient reuses its buffers and yields the fresh decode") {
  const std::vector<float> g = gaussianGradient(5000, 3);
  DecodeLimits limits;
  limits.expected_dim = uint32_t(g.size());
  SparseGradient scratch;
  scratch.indices.reserve(g.size());
  scratch.values.reserve(g.size());
  const uint32_t* indices_at = scratch.indices.data();
  const float* values_at = scratch.values.data();
  for (const std::string name : {"identity", "topk", "qsgd", "identity"}) {
    auto c = makeCompressor(specFor(name));
    tern::Rng rng(5);
    const Compressed out = c->compress(g, 50, rng);
    DecodeResult into = decode(out.bytes, limits, scratch);
    REQUIRE_MESSAGE(into.value.has_value(), into.error);
    CHECK(sameGradient(*into.value, *decode(out.bytes, limits).value));
    CHECK(into.value->values.data() == values_at);
    if (!into.value->isDense()) CHECK(into.value->indices.data() == indices_at);
    scratch = std::move(*into.value);
  }
  // A refused message leaves the buffers with the caller.
  std::vector<uint8_t> bad = {0, 1, 2, 3, 4, 5};
  CHECK_FALSE(decode(bad, limits, scratch).value.has_value());
  CHECK(scratch.values.data() == values_at);
}

TEST_CASE("a compressor told its decoded form is not wanted sends the same bytes") {
  // Identity leaves the decoded copy out; every other compressor may still fill it.
  tern::Rng values_rng(91);
  std::vector<float> g(1000);
  for (auto& x : g) x = float(values_rng() % 2001) / 1000.0f - 1.0f;
  for (const auto& name : compressorNames()) {
    CAPTURE(name);
    auto wanted = makeCompressor(specFor(name));
    auto unwanted = makeCompressor(specFor(name));
    unwanted->setDecodedWanted(false);
    CHECK(wanted->decodedWanted());
    CHECK_FALSE(unwanted->decodedWanted());
    tern::Rng a(5), b(5);
    const Compressed with = wanted->compress(g, 100, a);
    const Compressed without = unwanted->compress(g, 100, b);
    CHECK(with.bytes == without.bytes);
    if (name == "identity") CHECK(without.decoded.values.empty());
  }
}

TEST_CASE("decoding into a used scratch gives what decoding afresh gives") {
  // The scratch holds another message's values (larger, equal and smaller): none may remain.
  tern::Rng values_rng(93);
  auto vectorOf = [&values_rng](size_t n) {
    std::vector<float> g(n);
    for (auto& x : g) x = float(values_rng() % 2001) / 1000.0f - 1.0f;
    return g;
  };
  for (const auto& name : compressorNames()) {
    CAPTURE(name);
    auto c = makeCompressor(specFor(name));
    tern::Rng rng(7);
    const Compressed message = c->compress(vectorOf(500), 60, rng);
    DecodeLimits limits;
    limits.expected_dim = 500;
    const DecodeResult fresh = decode(message.bytes, limits);
    REQUIRE(fresh.value);
    for (size_t stale : {0, 60, 500, 2000}) {
      SparseGradient scratch;
      scratch.dim = 500;
      scratch.values.assign(stale, 123.0f);
      scratch.indices.assign(stale / 2, 7u);
      const DecodeResult reused = decode(message.bytes, limits, scratch);
      REQUIRE(reused.value);
      CHECK(reused.value->indices == fresh.value->indices);
      CHECK(reused.value->values == fresh.value->values);
      CHECK(reused.value->dim == fresh.value->dim);
    }
  }
}
