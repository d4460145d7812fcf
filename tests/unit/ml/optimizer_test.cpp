#include "common/ml/optimizer.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

using namespace tern::ml;

TEST_CASE("SGD with momentum and step decay produces the hand-computed deltas") {
  OptimizerSpec spec;
  spec.lr = 0.1;
  spec.momentum = 0.9;
  spec.decay = 0.5;
  spec.decay_every = 2;
  SgdOptimizer opt(spec, 2);
  std::vector<float> delta(2);

  // Round 0: v = g0 = (1, -2); lr 0.1.
  opt.step(std::vector<float>{1.0f, -2.0f}, 0, delta);
  CHECK(delta[0] == doctest::Approx(-0.1));
  CHECK(delta[1] == doctest::Approx(0.2));
  // Round 1: v = 0.9 (1, -2) + (0.5, 0.5) = (1.4, -1.3); lr still 0.1.
  opt.step(std::vector<float>{0.5f, 0.5f}, 1, delta);
  CHECK(delta[0] == doctest::Approx(-0.14));
  CHECK(delta[1] == doctest::Approx(0.13));
  // Round 2: v = 0.9 (1.4, -1.3) + (0, 1) = (1.26, -0.17); lr halves to 0.05.
  opt.step(std::vector<float>{0.0f, 1.0f}, 2, delta);
  CHECK(delta[0] == doctest::Approx(-0.063));
  CHECK(delta[1] == doctest::Approx(0.0085));
  CHECK(opt.velocity()[0] == doctest::Approx(1.26));
  CHECK(opt.velocity()[1] == doctest::Approx(-0.17));

  CHECK(opt.learningRate(3) == doctest::Approx(0.05));
  CHECK(opt.learningRate(5) == doctest::Approx(0.025));  // floor(5/2) = 2 halvings
}

TEST_CASE("without momentum or decay the delta is minus lr times the gradient in every round") {
  OptimizerSpec spec;
  spec.lr = 0.25;
  SgdOptimizer opt(spec, 3);
  std::vector<float> delta(3);
  for (uint64_t round : {0u, 7u, 1000u}) {
    opt.step(std::vector<float>{4.0f, -8.0f, 0.5f}, round, delta);
    // Powers of two: these products are exact in fp32.
    CHECK(delta == std::vector<float>{-1.0f, 2.0f, -0.125f});
  }
}

TEST_CASE("a restored velocity continues the momentum sequence and sizes are checked") {
  OptimizerSpec spec;
  spec.lr = 1.0;
  spec.momentum = 0.5;
  SgdOptimizer opt(spec, 2);
  opt.setVelocity({2.0f, -4.0f});
  std::vector<float> delta(2);
  opt.step(std::vector<float>{1.0f, 1.0f}, 0, delta);
  CHECK(delta == std::vector<float>{-2.0f, 1.0f});  // v = 0.5 (2, -4) + (1, 1) = (2, -1)
  std::vector<float> wrong(3);
  CHECK_THROWS_AS(opt.step(std::vector<float>{1.0f, 1.0f}, 0, wrong), std::invalid_argument);
}

TEST_CASE("a step from a velocity swapped out is the same step, and swapping back undoes it") {
  OptimizerSpec spec;
  spec.lr = 0.3;
  spec.momentum = 0.9;
  SgdOptimizer in_place(spec, 3), swapped(spec, 3);
  std::vector<float> before(3), delta_a(3), delta_b(3);
  const std::vector<std::vector<float>> grads{
      {1.0f, -2.0f, 0.25f}, {0.1f, 0.7f, -3.0f}, {-1e-3f, 5.0f, 2.0f}};
  for (uint64_t r = 0; r < grads.size(); ++r) {
    in_place.step(grads[r], r, delta_a);
    swapped.swapVelocity(before);
    swapped.stepFrom(before, grads[r], r, delta_b);
    CHECK(delta_a == delta_b);
    CHECK(in_place.velocity() == swapped.velocity());
  }
  // Not taken: the velocity before the step comes back as it was.
  const std::vector<float> kept = swapped.velocity();
  swapped.swapVelocity(before);
  const std::vector<float> huge{100.0f, 100.0f, 100.0f};
  swapped.stepFrom(before, huge, 3, delta_b);
  CHECK(swapped.velocity() != kept);
  swapped.swapVelocity(before);
  CHECK(swapped.velocity() == kept);
  std::vector<float> short_velocity(2);
  CHECK_THROWS_AS(swapped.stepFrom(short_velocity, grads[0], 4, delta_b), std::invalid_argument);
}
