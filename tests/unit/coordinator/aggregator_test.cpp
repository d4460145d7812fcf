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
  const uint64_t before = agg.modelChecksum();
  const StepResult r = agg.step(m, 0);
  CHECK(r.participants == 2);
  CHECK_FALSE(r.refused);
  CHECK(r.train_loss == doctest::Approx((100 * 2.0 + 300 * 4.0) / 400));
  CHECK(agg.parameters()[0] == doctest::Approx(1.0 - 0.5 * 0.25));
  CHECK(agg.parameters()[1] == doctest::Approx(1.0 - 0.5 * 3.0));
  CHECK(agg.previousChecksum() == before);
  CHECK(agg.modelChecksum() == checksum(agg.parameters()));
  CHECK_FALSE(agg.lastUpdate().empty());
  for (const auto& [id, w] : m.all()) CHECK_FALSE(w.pending.has_value());
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
