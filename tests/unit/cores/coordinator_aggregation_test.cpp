// The coordinator core's step: the aggregate is the data-share-weighted mean of the round's
// pushes (a duplicate applied once, a leaver's acknowledged push kept), a step that would
// overflow is refused and counted, and every round start says the learning rate it applies.
#include <doctest/doctest.h>

#include <cmath>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

TEST_CASE("the aggregate is the data-share-weighted mean and a duplicate push is applied once") {
  Harness h;
  uint32_t a = idOf(h.join("A", "a", 100), "A");
  uint32_t b = idOf(h.join("B", "b", 300), "B");
  const size_t d = h.core->parameters().size();
  const auto x0 = h.core->parameters();
  std::vector<float> ga(d), gb(d);
  for (size_t j = 0; j < d; ++j) {
    ga[j] = float(j) * 0.5f;
    gb[j] = 1.0f - float(j);
  }
  auto out = h.core->onMessage("A", h.push(a, 0, ga), 50, h.now);
  CHECK(h.core->round() == 0);
  // The duplicate is acknowledged again but does not count twice or close the round.
  out = h.core->onMessage("A", h.push(a, 0, ga), 50, h.now);
  CHECK(h.core->round() == 0);
  CHECK(h.core->rejections().at("duplicate") == 1);
  out = h.core->onMessage("B", h.push(b, 0, gb), 50, h.now);
  CHECK(h.core->round() == 1);
  // x1 = x0 - lr * (0.25 ga + 0.75 gb), computed independently in double.
  const double lr = h.settings.optimizer.lr;
  for (size_t j = 0; j < d; ++j) {
    double expect = double(x0[j]) - lr * (0.25 * ga[j] + 0.75 * gb[j]);
    CHECK(h.core->parameters()[j] == doctest::Approx(expect).epsilon(1e-6));
  }
  // A push for the closed round is late: dropped and counted, the model keeps its value.
  auto x1 = h.core->parameters();
  out = h.core->onMessage("A", h.push(a, 0, ga), 50, h.now);
  CHECK(hasError(out, wire::Error::BAD_ROUND));
  CHECK(h.core->parameters() == x1);
}

TEST_CASE("an acknowledged push of a worker that leaves or is marked gone counts in its round") {
  for (const bool leaves : {true, false}) {
    CAPTURE(leaves);
    Harness h;
    h.withTimers(100.0, 5.0);
    const auto [a, b] = h.joinAB();
    const size_t d = h.core->parameters().size();
    const auto x0 = h.core->parameters();
    const auto ga = ramp(d, 1.0f, 1.0f), gb = ramp(d, 0.0f, -0.5f);
    auto out = h.core->onMessage("A", h.push(a, 0, ga), 50, h.now);
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].message.envelope.has_ack());
    if (leaves) {
      h.core->onMessage("A", h.leave(), 10, h.now);
    } else {
      // B stays in touch; A is silent past its patience and is marked gone.
      h.now = 4.0;
      const Message hb = h.heartbeat(b);
      h.core->onMessage("B", hb, 10, h.now);
      h.now = 6.0;
      h.core->onTick();
      REQUIRE(h.core->aliveWorkers() == 1);
    }
    CHECK(h.core->round() == 0);
    h.core->onMessage("B", h.push(b, 0, gb), 50, h.now);
    REQUIRE(h.core->round() == 1);
    CHECK(h.core->lastRecord().participants == 2);
    // x1 = x0 - lr (0.25 ga + 0.75 gb) by the workers' samples, computed in double.
    const double lr = h.settings.optimizer.lr;
    for (size_t j = 0; j < d; ++j) {
      const double expect = double(x0[j]) - lr * (0.25 * ga[j] + 0.75 * gb[j]);
      CHECK(h.core->parameters()[j] == doctest::Approx(expect).epsilon(1e-6));
    }
  }
}

TEST_CASE(
    "a step that huge finite pushes would overflow is not taken, counted, and kept over a "
    "restart, and the momentum goes on from before it") {
  Harness h;
  h.settings.optimizer.lr = 10.0;
  h.settings.optimizer.momentum = 0.5;
  h.withTimers(1000.0, 1000.0);
  const auto [a, b] = h.joinAB();
  const size_t d = h.core->parameters().size();
  const auto x0 = h.core->parameters();
  const auto g0 = ramp(d, -0.3f, 0.1f), g2 = ramp(d, 0.05f, -0.02f);
  // Round 0: an ordinary step, x1 = x0 - lr v0 with v0 = g0 (both workers push g0).
  h.core->onMessage("A", h.push(a, 0, g0), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, g0), 50, h.now);
  REQUIRE(h.core->round() == 1);
  const auto x1 = h.core->parameters();
  // Round 1: finite pushes whose step, lr * 3e38, is beyond a float.
  std::vector<float> huge(d, 0.0f);
  huge[0] = 3e38f;
  h.core->onMessage("A", h.push(a, 1, huge), 50, h.now);
  std::vector<Outgoing> out;
  CHECK_NOTHROW(out = h.core->onMessage("B", h.push(b, 1, huge), 50, h.now));
  CHECK(h.core->round() == 2);
  CHECK(h.core->stepsRefused() == 1);
  CHECK(h.core->parameters() == x1);
  // Round 2: the momentum is v0's, not the refused step's: x3 = x1 - lr (0.5 g0 + g2).
  h.core->onMessage("A", h.push(a, 2, g2), 50, h.now);
  h.core->onMessage("B", h.push(b, 2, g2), 50, h.now);
  REQUIRE(h.core->round() == 3);
  for (size_t j = 0; j < d; ++j) {
    CAPTURE(j);
    const double x3 = double(x1[j]) - 10.0 * (0.5 * double(g0[j]) + double(g2[j]));
    CHECK(h.core->parameters()[j] == doctest::Approx(x3).epsilon(1e-5));
    CHECK(std::isfinite(h.core->parameters()[j]));
  }
  CHECK(x1 != x0);
  // The counter survives a restart from the checkpoint.
  auto restored = testing::DrivenCoordinator::restore(
      h.settings, ml::makeModel(h.settings.model), nullptr, 43, [&h] { return h.now; },
      h.core->checkpoint());
  CHECK(restored->stepsRefused() == 1);
  CHECK(restored->parameters() == h.core->parameters());
}

TEST_CASE("every round start says the learning rate the round's pushes are applied with") {
  Harness h;
  h.settings.optimizer.lr = 0.2;
  h.settings.optimizer.decay = 0.5;
  h.settings.optimizer.decay_every = 2;
  h.withTimers(1.0, 1000.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  std::vector<Outgoing> out = h.join("B", "b", 300);
  const uint32_t b = idOf(out, "B");
  const size_t d = h.core->parameters().size();
  for (uint64_t r = 0; r < 5; ++r) {
    size_t starts = 0;
    for (const auto& o : out) {
      if (!o.message.envelope.has_round_start()) continue;
      CAPTURE(r);
      CHECK(o.message.envelope.round_start().round() == r);
      CHECK(o.message.envelope.round_start().learning_rate() == 0.2 * std::pow(0.5, double(r / 2)));
      ++starts;
    }
    CHECK(starts == 2);
    h.core->onMessage("A", h.push(a, r, std::vector<float>(d, 0.5f)), 50, h.now);
    out = h.core->onMessage("B", h.push(b, r, std::vector<float>(d, 0.5f)), 50, h.now);
    REQUIRE(h.core->round() == r + 1);
  }
}
