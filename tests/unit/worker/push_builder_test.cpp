// PushBuilder: the level held to the coordinator's message limit (checked against a search of
// every level), and a push's content plus the residual adding up to the gradient.
#include "worker/push_builder.hpp"

#include <doctest/doctest.h>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "proto/worker_messages.hpp"

using namespace tern;

TEST_CASE("the largest fitting level is the largest level whose codec bound fits, by search") {
  const auto topk = compression::makeCompressor({"topk"});
  const uint32_t dim = 300;
  for (uint64_t max_bytes : {10ull, 40ull, 200ull, 700ull, 1300ull, 5000ull}) {
    uint32_t expected = 0;
    for (uint32_t level = 1; level <= dim; ++level) {
      size_t bytes = topk->encodedBytes(dim, level);
      if (level == dim) bytes = std::max(bytes, topk->encodedBytes(dim, dim - 1));
      if (bytes <= max_bytes) expected = level;
    }
    CHECK(worker::largestFittingLevel(*topk, worker::CountKind::fixed, dim, max_bytes) == expected);
  }
}

namespace {

config::WorkerSettings topkWithFeedback() {
  config::WorkerSettings s;
  s.compressor.name = "topk";
  s.error_feedback_auto = false;
  s.error_feedback = true;
  return s;
}

// A top-k push builder with error feedback, its link, stats and generator.
struct TopKRig {
  config::WorkerSettings s = topkWithFeedback();
  worker::PushBuilder builder{worker::workerOptions(s).push, 0.0, std::nullopt};
  worker::LinkMonitor link{s.link, 30.0};
  worker::WorkerStats stats;
  Rng rng{1};
};

}  // namespace

TEST_CASE("a top-k push carries the largest coordinates and the residual keeps the rest") {
  TopKRig rig;
  auto& [s, builder, link, stats, rng] = rig;
  const std::vector<float> grad{5.0f, -4.0f, 1.0f, 0.5f, 3.0f};
  Message m = proto::pushMessage({1, 1}, 0);
  builder.roundStarts(0.0, std::nullopt, std::nullopt);
  const auto built = builder.build(m, grad, 0.7, false, 2, link, 0.0, 0.0, rng, stats);
  CHECK(built.computed);
  CHECK(stats.rounds == 1);
  CHECK(m.envelope.push().level() == 2);
  CHECK(m.envelope.push().local_loss() == 0.7);
  auto decoded = compression::decode(m.payload, {});
  REQUIRE(decoded.value.has_value());
  std::vector<float> sent(grad.size(), 0.0f);
  compression::addScaled(*decoded.value, 1.0f, sent);
  CHECK(sent == std::vector<float>{5.0f, -4.0f, 0.0f, 0.0f, 0.0f});
  CHECK(builder.residual() == std::vector<float>{0.0f, 0.0f, 1.0f, 0.5f, 3.0f});
  // Refused: what it carried goes back into the residual.
  builder.takeBack(0, stats);
  CHECK(stats.taken_back == 1);
  CHECK(builder.residual() == grad);
}

TEST_CASE("a gradient that is not finite is pushed as a NaN loss without payload") {
  config::WorkerSettings s;
  s.compressor.name = "identity";
  worker::PushBuilder builder(worker::workerOptions(s).push, 0.0, std::nullopt);
  worker::LinkMonitor link(s.link, 30.0);
  worker::WorkerStats stats;
  Rng rng(1);
  Message m = proto::pushMessage({1, 1}, 0);
  const std::vector<float> grad{1.0f, std::numeric_limits<float>::infinity()};
  const auto built = builder.build(m, grad, 0.5, false, 2, link, 0.0, 0.0, rng, stats);
  CHECK_FALSE(built.computed);
  CHECK(std::isnan(m.envelope.push().local_loss()));
  CHECK(m.payload.empty());
  CHECK(stats.non_finite_gradients == 1);
  CHECK(stats.rounds == 0);
}

TEST_CASE("a residual that overflows with a finite gradient is dropped, not kept to fail again") {
  TopKRig rig;
  auto& [s, builder, link, stats, rng] = rig;
  const float huge = 3e38f;
  auto push = [&](const std::vector<float>& grad, uint64_t round) {
    Message m = proto::pushMessage({1, 1}, round);
    builder.roundStarts(0.0, std::nullopt, std::nullopt);
    return builder.build(m, grad, 1.0, false, 1, link, 0.0, 0.0, rng, stats).computed;
  };
  CHECK(push({huge, huge * 0.5f, 1.0f}, 0));  // sends the first, keeps 1.5e38 owed
  CHECK(builder.residual()[1] == huge * 0.5f);
  CHECK_FALSE(push({1.0f, huge, 1.0f}, 1));  // 1.5e38 + 3e38 overflows
  CHECK(stats.residuals_dropped == 1);
  CHECK(stats.non_finite_gradients == 1);
  CHECK(builder.residual().empty());
  CHECK(push({1.0f, 2.0f, 1.0f}, 2));  // from the gradient alone again
  CHECK(builder.residual() == std::vector<float>{1.0f, 0.0f, 1.0f});
}

TEST_CASE("the push strategy is decided once, from the compressor's kind") {
  config::WorkerSettings s;
  s.compressor.name = "stochastic";
  const auto strategy = worker::workerOptions(s).push.strategy;
  CHECK(strategy.count_kind == worker::CountKind::random);
  CHECK_FALSE(strategy.error_feedback);  // auto: off for an unbiased compressor
  CHECK_FALSE(strategy.threshold);
  using compression::CompressorKind;
  const auto threshold = worker::pushStrategy(CompressorKind::kThreshold, true, false);
  CHECK(threshold.threshold);
  CHECK(threshold.error_feedback);  // auto: on for a biased compressor
  CHECK(threshold.count_kind == worker::CountKind::fixed);
  CHECK_FALSE(worker::pushStrategy(CompressorKind::kTopK, false, false).error_feedback);
  // auto: off for identity, which leaves nothing behind; on for fp16, which rounds.
  CHECK_FALSE(worker::pushStrategy(CompressorKind::kIdentity, true, true).error_feedback);
  CHECK(worker::pushStrategy(CompressorKind::kIdentity, false, true).error_feedback);
  CHECK(worker::pushStrategy(CompressorKind::kFp16, true, false).error_feedback);
  s.compressor.name = "no-such";
  CHECK_THROWS(worker::workerOptions(s));
}

TEST_CASE("a push of a scheme without a level reports the coordinates it carries and not the cap") {
  std::vector<float> grad(40, 0.01f);
  grad[3] = 5.0f;
  grad[17] = -4.0f;
  grad[30] = 2.0f;
  for (const char* name : {"threshold", "identity", "fp16"}) {
    CAPTURE(name);
    config::WorkerSettings s;
    s.compressor.name = name;
    s.compressor.threshold = 1.0;
    worker::PushBuilder builder(worker::workerOptions(s).push, 0.0, std::nullopt);
    worker::LinkMonitor link(s.link, 30.0);
    worker::WorkerStats stats;
    Rng rng(1);
    Message m = proto::pushMessage({1, 1}, 0);
    builder.roundStarts(0.0, std::nullopt, std::nullopt);
    REQUIRE(builder.build(m, grad, 0.5, false, 10, link, 0.0, 0.0, rng, stats).computed);
    // The reference: the coordinates the payload decodes to.
    auto decoded = compression::decode(m.payload, {});
    REQUIRE(decoded.value.has_value());
    const auto carried = uint32_t(decoded.value->nonZeros());
    CHECK(carried == (std::string(name) == "threshold" ? 3u : 40u));
    CHECK(m.envelope.push().level() == carried);
    CHECK(stats.last_level == carried);
  }
}
