#include "common/compression/error_feedback.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "test_support.hpp"

using namespace tern::compression;
using namespace tern::compression::testing;

TEST_CASE("error feedback keeps e_new = v - decoded exactly, coordinate by coordinate") {
  for (const std::string& name : compressorNames()) {
    CAPTURE(name);
    CompressorSpec spec;
    spec.name = name;
    spec.threshold = 1.0;
    ErrorFeedback ef(makeCompressor(spec), true);
    tern::Rng rng(9);
    for (int round = 0; round < 5; ++round) {
      const auto g = gaussianGradient(3000, 40 + round);
      const std::vector<float> e_old =
          ef.residual().empty() ? std::vector<float>(3000, 0.0f) : ef.residual();
      const auto v_span = ef.corrected(g);
      const std::vector<float> v(v_span.begin(), v_span.end());
      for (size_t j = 0; j < g.size(); ++j) REQUIRE(v[j] == e_old[j] + g[j]);
      const Compressed c = ef.compressCorrected(100, rng);
      const auto dec = toDense(c.decoded);
      for (size_t j = 0; j < g.size(); ++j) REQUIRE(ef.residual()[j] == v[j] - dec[j]);
    }
  }
}

TEST_CASE("error feedback disabled passes the gradient through and keeps no residual") {
  CompressorSpec spec;
  ErrorFeedback ef(makeCompressor(spec), false);
  tern::Rng rng(1);
  const auto g = gaussianGradient(500, 3);
  const auto v = ef.corrected(g);
  CHECK(bitwiseEqual(std::vector<float>(v.begin(), v.end()), g));
  const Compressed c = ef.compress(g, 10, rng);
  CHECK(c.decoded.nonZeros() == 10);
  CHECK(ef.residual().empty());
}

TEST_CASE(
    "error feedback over top-k keeps its residual bounded, so what it sends tracks the gradients") {
  // With a constant gradient the residual of an unsent coordinate grows until it is selected;
  // what was sent differs from the sum of the gradients by the residual alone, which stays
  // bounded while that sum grows with the rounds.
  CompressorSpec spec;
  ErrorFeedback ef(makeCompressor(spec), true);
  tern::Rng rng(1);
  const auto g = gaussianGradient(200, 8);
  std::vector<double> sent(200, 0.0);
  const int rounds = 400;
  // Top-k keeps at least the fraction delta = k/d of ||v||^2, so ||v - Q(v)|| <= q ||v|| with
  // q = sqrt(1 - delta); with v = g + e that bounds the residual for ever by q / (1 - q) ||g||
  // (38.5 ||g|| here), where a compressor that never sent would hold rounds * ||g|| by the end.
  double g_norm = 0.0;
  for (float x : g) g_norm += double(x) * x;
  g_norm = std::sqrt(g_norm);
  const double q = std::sqrt(1.0 - 10.0 / 200.0);
  double largest_residual = 0.0;
  for (int r = 0; r < rounds; ++r) {
    const Compressed c = ef.compress(g, 10, rng);
    const auto dec = toDense(c.decoded);
    for (size_t j = 0; j < 200; ++j) sent[j] += dec[j];
    double e_norm = 0.0;
    for (float x : ef.residual()) e_norm += double(x) * x;
    largest_residual = std::max(largest_residual, std::sqrt(e_norm));
  }
  CHECK(largest_residual <= q / (1.0 - q) * g_norm * (1.0 + 1e-5));
  for (size_t j = 0; j < 200; ++j) {
    // sent + residual == rounds * g up to float rounding of the running residual.
    CHECK(sent[j] + ef.residual()[j] == doctest::Approx(double(g[j]) * rounds).epsilon(1e-4));
  }
}

TEST_CASE("error feedback resets its residual on reset and on a dimension change") {
  CompressorSpec spec;
  ErrorFeedback ef(makeCompressor(spec), true);
  tern::Rng rng(1);
  ef.compress(gaussianGradient(100, 1), 5, rng);
  CHECK(ef.residual().size() == 100);
  ef.compress(gaussianGradient(50, 2), 5, rng);
  CHECK(ef.residual().size() == 50);
  ef.reset();
  CHECK(ef.residual().empty());
  CHECK_THROWS_AS(ef.compressCorrected(5, rng), std::logic_error);
}

TEST_CASE("feedbacks sharing one corrected buffer, taking turns, match feedbacks with their own") {
  for (const std::string& name : compressorNames()) {
    CAPTURE(name);
    CompressorSpec spec;
    spec.name = name;
    spec.threshold = 1.0;
    auto shared = std::make_shared<std::vector<float>>();
    ErrorFeedback own_a(makeCompressor(spec), true), own_b(makeCompressor(spec), true);
    ErrorFeedback sh_a(makeCompressor(spec), true, shared),
        sh_b(makeCompressor(spec), true, shared);
    tern::Rng r1(4), r2(4), r3(4), r4(4);
    for (int round = 0; round < 4; ++round) {
      const auto ga = gaussianGradient(2000, 10 + round), gb = gaussianGradient(2000, 60 + round);
      const Compressed oa = own_a.compress(ga, 50, r1), sa = sh_a.compress(ga, 50, r2);
      const Compressed ob = own_b.compress(gb, 50, r3), sb = sh_b.compress(gb, 50, r4);
      CHECK(oa.bytes == sa.bytes);
      CHECK(ob.bytes == sb.bytes);
      CHECK(own_a.residual() == sh_a.residual());
      CHECK(own_b.residual() == sh_b.residual());
      // A refused push taken back and sent again, by one of the sharers.
      CHECK(sh_a.takeBack(sa.decoded) == own_a.takeBack(oa.decoded));
      const auto va = sh_a.resendResidual(2000);
      const auto vo = own_a.resendResidual(2000);
      CHECK(std::equal(va.begin(), va.end(), vo.begin(), vo.end()));
      CHECK(sh_a.compressCorrected(30, r2).bytes == own_a.compressCorrected(30, r1).bytes);
      CHECK(own_a.residual() == sh_a.residual());
    }
    CHECK(shared->size() == 2000);  // the one buffer they built v in
  }
}

TEST_CASE("correctedIfFinite is corrected for a finite gradient and changes nothing for another") {
  CompressorSpec spec;
  spec.name = "topk";
  ErrorFeedback with(makeCompressor(spec), true);
  ErrorFeedback reference(makeCompressor(spec), true);
  tern::Rng rng_a(4), rng_b(4);
  for (int round = 0; round < 4; ++round) {
    auto g = gaussianGradient(2000, 70 + round);
    const auto v = with.correctedIfFinite(g);
    REQUIRE(v.has_value());
    const auto w = reference.corrected(g);
    REQUIRE(std::equal(v->begin(), v->end(), w.begin(), w.end()));
    const Compressed a = with.compressCorrected(50, rng_a);
    const Compressed b = reference.compressCorrected(50, rng_b);
    REQUIRE(a.bytes == b.bytes);
    REQUIRE(with.residual() == reference.residual());
    // A NaN or an infinity anywhere: refused, the residual as it was, nothing to compress.
    for (float badness : {std::nanf(""), INFINITY, -INFINITY}) {
      const std::vector<float> residual = with.residual();
      g[size_t(round * 499)] = badness;
      CHECK_FALSE(with.correctedIfFinite(g).has_value());
      CHECK(with.residual() == residual);
      CHECK_THROWS_AS(with.compressCorrected(50, rng_a), std::logic_error);
    }
  }
  // Without feedback: the gradient itself, or nothing.
  ErrorFeedback off(makeCompressor(spec), false);
  auto g = gaussianGradient(100, 5);
  const auto v = off.correctedIfFinite(g);
  REQUIRE(v.has_value());
  CHECK(v->data() == g.data());
  g[99] = std::nanf("");
  CHECK_FALSE(off.correctedIfFinite(g).has_value());
}
