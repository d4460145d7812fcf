// ShardTrainer: the gradient of the drawn minibatch, compared with the model's own gradient over
// the same rows, and local steps as the model delta over the local step.
#include "worker/trainer.hpp"

#include <doctest/doctest.h>

#include <random>

#include "common/util/rng.hpp"

using namespace tern;

namespace {

struct Setup {
  std::shared_ptr<ml::Dataset> shard =
      std::make_shared<ml::Dataset>(ml::syntheticDense(40, 3, 2, 5));
  std::shared_ptr<ml::Model> model;
  worker::GradientRequest request;
  Setup(uint32_t steps = 1) {
    ml::ModelSpec spec;
    spec.features = 3;
    spec.classes = 2;
    model = ml::makeModel(spec);
    request.id = 9;
    request.round = 4;
    request.worker_id = 2;
    request.params = std::make_shared<std::vector<float>>(model->numParams(), 0.1f);
    request.model = model;
    request.plan = {8, steps, 0.5, 17};
  }
  // The rows the trainer draws: seeded by the plan's seed, the worker and the round.
  std::vector<size_t> rows(Rng& rng) const {
    std::vector<size_t> r(8);
    std::uniform_int_distribution<size_t> pick(0, shard->rows() - 1);
    for (auto& x : r) x = pick(rng);
    return r;
  }
};

}  // namespace

TEST_CASE("the trainer's gradient is the model's over the minibatch drawn for the round") {
  Setup s;
  worker::ShardTrainer trainer(s.shard);
  const auto got = trainer.gradient(s.request);
  REQUIRE(got.has_value());
  CHECK(got->request_id == 9);
  CHECK(got->rows_used == 8);
  Rng rng(deriveSeed(17 ^ (uint64_t(2) << 32), 4));
  const auto rows = s.rows(rng);
  std::vector<float> grad(s.model->numParams());
  const double loss = s.model->lossAndGradient(*s.request.params, *s.shard, rows, grad);
  CHECK(got->loss == doctest::Approx(loss));
  CHECK(got->gradient == grad);
}

TEST_CASE("with local steps the trainer returns the model delta divided by the local step") {
  Setup s(3);
  worker::ShardTrainer trainer(s.shard);
  const auto got = trainer.gradient(s.request);
  REQUIRE(got.has_value());
  CHECK(got->rows_used == 24);
  Rng rng(deriveSeed(17 ^ (uint64_t(2) << 32), 4));
  std::vector<float> local = *s.request.params, g(local.size());
  for (int step = 0; step < 3; ++step) {
    s.model->lossAndGradient(local, *s.shard, s.rows(rng), g);
    for (size_t j = 0; j < local.size(); ++j) local[j] -= 0.5f * g[j];
  }
  for (size_t j = 0; j < local.size(); ++j)
    CHECK(got->gradient[j] == float(((*s.request.params)[j] - local[j]) / 0.5));
}

TEST_CASE("a cancelled computation gives no result, asked before it starts and between steps") {
  Setup s(3);
  int asked = 0;
  worker::ShardTrainer trainer(s.shard, [&] { return ++asked >= 2; });
  CHECK_FALSE(trainer.gradient(s.request).has_value());
  CHECK(asked == 2);  // before the first step, and before the second
}

TEST_CASE("asked to, the trainer evaluates the round's parameters on its held-out rows") {
  Setup s;
  auto eval = std::make_shared<ml::Dataset>(ml::syntheticDense(30, 3, 2, 11));
  std::vector<float> params(s.model->numParams());
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.3f * float(i % 3) - 0.2f;
  s.request.params = std::make_shared<std::vector<float>>(params);
  s.request.evaluate = true;
  worker::ShardTrainer trainer(s.shard, {}, eval);
  const auto got = trainer.gradient(s.request);
  REQUIRE(got.has_value());
  REQUIRE(got->evaluation.has_value());
  CHECK(got->evaluation->rows == 30);
  CHECK(got->evaluation->loss == doctest::Approx(s.model->loss(params, *eval)));
  CHECK(got->evaluation->accuracy == doctest::Approx(s.model->accuracy(params, *eval)));
  // The gradient is the one the trainer computes without evaluating.
  s.request.evaluate = false;
  const auto plain = worker::ShardTrainer(s.shard).gradient(s.request);
  REQUIRE(plain.has_value());
  CHECK(got->gradient == plain->gradient);
  CHECK_FALSE(plain->evaluation.has_value());
  // Not asked: no evaluation.
  CHECK_FALSE(trainer.gradient(s.request)->evaluation.has_value());
}
