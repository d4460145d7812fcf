// Aggregation: the samples-weighted sum of the pushes, the optimizer step, and the guard that
// keeps a non-finite step out of the model.
#include "server/aggregator.hpp"

#include <doctest/doctest.h>

#include <limits>

#include "common/util/checksum.hpp"
#include "tests/unit/coordinator/dense_gradient.hpp"

using namespace tern;
using namespace tern::server;

namespace {

Worker& pusher(Membership& m, uint32_t id, uint64_t samples, std::vector<float> g, double loss) {
  Worker& w = m.all()[id];
  w.rec.id = id;
  w.samples = samples;
  w.pending = dense(std::move(g));
  w.loss = loss;
  return w;
}

}  // namespace

TEST_CASE("the step is minus lr times the samples-weighted mean of the pushes") {
  ml::OptimizerSpec sgd;
  sgd.lr = 0.5;
  Aggregator agg(sgd, {1.0f, 1.0f}, 1 << 20);
  Membership m;
  pusher(m, 0, 100, {1.0f, 0.0f}, 2.0);
  pusher(m, 1, 300, {0.0f, 4.0f}, 4.0);
  m.all()[2].rec.id = 2;  // pushed nothing: not in the sum
  const StepResult r = agg.step(m, 0);
  CHECK(r.participants == 2);
  CHECK_FALSE(r.refused);
  CHECK(r.train_loss == doctest::Approx((100 * 2.0 + 300 * 4.0) / 400));
  CHECK(agg.parameters()[0] == doctest::Approx(1.0 - 0.5 * 0.25));
  CHECK(agg.parameters()[1] == doctest::Approx(1.0 - 0.5 * 3.0));
  // A dense update: a replica one round behind would be sent no less than the model.
  CHECK_FALSE(agg.previousChecksum().has_value());
  CHECK(agg.modelChecksum() == checksum(agg.parameters()));
  CHECK_FALSE(agg.lastUpdate().empty());
  for (const auto& [id, w] : m.all()) CHECK_FALSE(w.pending.has_value());
}

TEST_CASE("after a sparse update the previous model's checksum is that of the model before it") {
  ml::OptimizerSpec sgd;
  sgd.lr = 0.25;
  sgd.momentum = 0.5;
  std::vector<float> initial(64);
  for (size_t j = 0; j < initial.size(); ++j) initial[j] = 0.01f * float(j) - 0.2f;
  Aggregator agg(sgd, initial, 1 << 20);
  Membership m;
  CHECK_FALSE(agg.previousChecksum().has_value());  // no round closed yet
  std::vector<float> before = initial;
  for (uint64_t round = 0; round < 4; ++round) {
    std::vector<float> g(64, 0.0f);
    g[3 + round] = 1.5f;
    g[40 - round] = -0.75f;
    pusher(m, 0, 10, g, 1.0);
    agg.step(m, round);
    const auto previous = agg.previousChecksum();
    REQUIRE(previous.has_value());
    CHECK(*previous == checksum(before));
    CHECK(*previous != checksum(agg.parameters()));
    before = agg.parameters();
  }
  // The model's checksum asked before the step is the next previous one, too.
  const uint64_t current = agg.modelChecksum();
  std::vector<float> g(64, 0.0f);
  g[10] = 2.0f;
  pusher(m, 0, 10, g, 1.0);
  agg.step(m, 4);
  CHECK(agg.previousChecksum() == current);
}

TEST_CASE("the encoded update carries the exact step a replica adds") {
  ml::OptimizerSpec sgd;
  sgd.lr = 0.1;
  Aggregator agg(sgd, {0.5f, -0.5f, 0.25f, 0.0f}, 1 << 20);
  Membership m;
  pusher(m, 0, 10, {0.3f, 0.0f, 0.0f, 0.0f}, 1.0);
  std::vector<float> replica = agg.parameters();
  agg.step(m, 0);
  compression::DecodeLimits limits;
  limits.expected_dim = limits.max_dim = 4;
  limits.max_bytes = 1 << 20;
  auto decoded = compression::decode(agg.lastUpdate(), limits);
  REQUIRE(decoded.value);
  std::vector<float> delta(4, 0.0f);
  compression::addScaled(*decoded.value, 1.0f, delta);
  for (size_t j = 0; j < replica.size(); ++j) replica[j] += delta[j];
  CHECK(checksum(replica) == checksum(agg.parameters()));
}

TEST_CASE("a replica adding every round's update stays the model, dense rounds and sparse alike") {
  // The step's buffers change hands between the update, the residual and the next step: what a
  // replica decodes must still be exactly the step, round after round.
  ml::OptimizerSpec sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.5;
  const size_t d = 40;
  std::vector<float> initial(d);
  for (size_t j = 0; j < d; ++j) initial[j] = 0.1f * float(j % 7) - 0.3f;
  Aggregator agg(sgd, initial, 1 << 20);
  std::vector<float> replica = initial;
  compression::DecodeLimits limits;
  limits.expected_dim = limits.max_dim = uint32_t(d);
  limits.max_bytes = 1 << 20;
  Membership m;
  for (uint64_t round = 0; round < 12; ++round) {
    std::vector<float> g(d, 0.0f);
    const bool dense_round = round % 3 != 2;  // two dense rounds, then a sparse one
    for (size_t j = 0; j < d; ++j)
      if (dense_round || j % 9 == round % 9) g[j] = 0.01f * float((j * 7 + round * 3) % 11) - 0.04f;
    pusher(m, 0, 10, g, 1.0);
    pusher(m, 1, 30, g, 1.0);
    agg.step(m, round);
    auto decoded = compression::decode(agg.lastUpdate(), limits);
    REQUIRE(decoded.value);
    compression::addScaled(*decoded.value, 1.0f, replica);
    CAPTURE(round);
    CHECK(checksum(replica) == checksum(agg.parameters()));
  }
}

TEST_CASE("a step that would overflow is not taken: model and momentum stay") {
  ml::OptimizerSpec sgd;
  sgd.lr = 1.0;
  sgd.momentum = 0.9;
  const float huge = std::numeric_limits<float>::max();
  Aggregator agg(sgd, {-huge, huge}, 1 << 20);
  Membership m;
  pusher(m, 0, 1, {1.0f, 1.0f}, 1.0);
  agg.step(m, 0);
  const std::vector<float> params = agg.parameters();
  const std::vector<float> velocity = agg.velocity();
  pusher(m, 0, 1, {huge, -huge}, 1.0);
  pusher(m, 1, 1, {huge, -huge}, 1.0);
  const StepResult r = agg.step(m, 1);
  CHECK(r.refused);
  CHECK(agg.parameters() == params);
  CHECK(agg.velocity() == velocity);
}

TEST_CASE("the largest frame is the model's floats or a dense update, whichever is larger") {
  Aggregator agg({}, std::vector<float>(100, 0.0f), 1 << 20);
  CHECK(agg.largestFrameBytes() >= 400);
  CHECK(agg.decode(std::vector<uint8_t>{1, 2, 3}).value == std::nullopt);
}
