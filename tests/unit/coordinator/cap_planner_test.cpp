// Cap planning: measured prices as running means, plans over the live workers, admission into
// an open round within what its budget leaves, and re-plans when an input moved.
#include "server/cap_planner.hpp"

#include <doctest/doctest.h>

using namespace tern;
using namespace tern::server;

namespace {

Worker& live(Membership& m, uint32_t id, uint64_t samples) {
  Worker& w = m.all()[id];
  w.rec.id = id;
  w.rec.alive = true;
  w.samples = samples;
  return w;
}

}  // namespace

TEST_CASE("a measured price is the first round's, then a running mean weighting new rounds 1/4") {
  const auto first = foldPrice(std::nullopt, {100.0, 8.0});
  CHECK(first.per_push == 100.0);
  CHECK(first.per_coordinate == 8.0);
  const auto next = foldPrice(first, {200.0, 4.0});
  CHECK(next.per_push == doctest::Approx(0.75 * 100.0 + 0.25 * 200.0));
  CHECK(next.per_coordinate == doctest::Approx(0.75 * 8.0 + 0.25 * 4.0));
}

TEST_CASE("a plan gives every live worker its data share and a cap within the model") {
  config::AllocationSettings s;
  s.budget.mean_ratio = 0.5;
  CapPlanner planner(s, 100);
  Membership m;
  live(m, 0, 100);
  live(m, 1, 300);
  Worker& gone = live(m, 2, 600);
  gone.rec.alive = false;
  planner.plan(m);
  CHECK(m.all()[0].rec.share == doctest::Approx(0.25));
  CHECK(m.all()[1].rec.share == doctest::Approx(0.75));
  CHECK(gone.rec.share == 0.0);
  for (uint32_t id : {0u, 1u}) {
    CHECK(m.all()[id].rec.cap > 0);
    CHECK(m.all()[id].rec.cap <= 100);
  }
  CHECK(planner.roundsSincePlan() == 0);
}

TEST_CASE("a joiner gets a seat when nobody else holds one, and none once the budget is spent") {
  config::AllocationSettings s;
  s.budget.mean_ratio = 0.5;
  CapPlanner planner(s, 100);
  Membership m;
  Worker& a = live(m, 0, 100);
  planner.plan(m);
  CHECK(planner.admit(m, a, 0));
  CHECK(a.plan.round_cap == a.rec.cap);
  // Another member holding the whole model's coordinates spends the round's budget.
  Worker& b = live(m, 1, 100);
  planner.plan(m);
  a.plan.round_cap = 100;
  CHECK_FALSE(planner.admit(m, b, 0));
  CHECK_FALSE(b.plan.in_round);
}

TEST_CASE("a round's pushes fold into each worker's price and the mean, a schedule re-plans") {
  config::AllocationSettings s;
  s.budget.mean_ratio = 0.5;
  s.reallocate_every = 2;
  CapPlanner planner(s, 100);
  Membership m;
  Worker& a = live(m, 0, 100);
  planner.plan(m);
  a.round_push = PushSample{50.0, 80.0, 10.0};
  CHECK_FALSE(planner.closeRound(m));
  REQUIRE(a.push_price);
  CHECK(a.push_price->per_push == 50.0);
  CHECK(a.push_price->per_coordinate == 8.0);
  REQUIRE(planner.meanPrice());
  CHECK(planner.meanPrice()->per_coordinate == 8.0);
  CHECK_FALSE(a.round_push);
  CHECK(planner.closeRound(m));  // the second round since the plan
}

TEST_CASE("under cost-aware, a first fitted link re-plans at the round's close") {
  config::AllocationSettings s;
  s.method = allocation::Method::kCostAware;
  s.budget.mean_ratio = 0.5;
  CapPlanner planner(s, 100);
  Membership m;
  Worker& a = live(m, 0, 100);
  planner.plan(m);
  wire::LinkModel fitted;
  fitted.set_b_seconds_per_packet(0.01);
  fitted.set_b_stderr(0.001);
  planner.noteLink(a, fitted);
  CHECK(planner.closeRound(m));
  CHECK_FALSE(planner.closeRound(m));

  config::AllocationSettings uniform;
  uniform.method = allocation::Method::kUniform;
  uniform.budget.mean_ratio = 0.5;
  CapPlanner volume(uniform, 100);
  volume.plan(m);
  volume.noteLink(a, fitted);
  CHECK_FALSE(volume.closeRound(m));
}
