// Federated evaluation through the coordinator core (docs/python.md): the round start asks the
// workers with held-out rows for an evaluation every eval_every rounds; the round's accuracy is
// the row-weighted mean of what their pushes report, recomputed here by hand; unusable reports are
// dropped and counted. And an external model's layout check at the join.
#include <doctest/doctest.h>

#include <cmath>

#include "coordinator_harness.hpp"
#include "model_spec.hpp"

using namespace tern;
using namespace tern::testing;

namespace {

Message joinWithEval(uint32_t eval_rows, const std::string& name) {
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_join()->set_worker_name(name);
  m.envelope.mutable_join()->set_sample_count(100);
  m.envelope.mutable_join()->set_eval_rows(eval_rows);
  return m;
}

bool asksEvaluation(const std::vector<Outgoing>& out, const std::string& peer, uint64_t round) {
  for (const auto& o : out) {
    const auto& e = o.message.envelope;
    if (o.peer == peer && e.has_round_start() && e.round_start().round() == round) {
      return e.round_start().evaluate();
    }
  }
  FAIL("no round start " << round << " for " << peer);
  return false;
}

Message evaluatedPush(Harness& h, uint32_t id, uint64_t round, double accuracy, uint64_t rows,
                      double loss = 0.5) {
  Message m = h.push(id, round, std::vector<float>(h.core->parameters().size(), 0.01f));
  auto* e = m.envelope.mutable_push()->mutable_evaluation();
  e->set_round(round);
  e->set_accuracy(accuracy);
  e->set_loss(loss);
  e->set_rows(rows);
  return m;
}

}  // namespace

TEST_CASE("the round's accuracy is the row-weighted mean of the workers' evaluations") {
  Harness h;
  h.settings.eval_every = 2;
  h.settings.max_rounds = 10;
  h.withTimers(10.0, 100.0);
  const uint32_t a = idOf(h.core->onMessage("A", joinWithEval(300, "a"), 10, h.now), "A");
  std::vector<Outgoing> out = h.core->onMessage("B", joinWithEval(0, "b"), 10, h.now);
  const uint32_t b = idOf(out, "B");
  // Round 0 asks nobody; only a worker with held-out rows is ever asked.
  CHECK_FALSE(asksEvaluation(out, "A", 0));
  h.core->onMessage("A", h.push(a, 0, std::vector<float>(8, 0.01f)), 50, h.now);
  out = h.core->onMessage("B", h.push(b, 0, std::vector<float>(8, 0.01f)), 50, h.now);
  CHECK_FALSE(asksEvaluation(out, "A", 1));
  h.core->onMessage("A", h.push(a, 1, std::vector<float>(8, 0.01f)), 50, h.now);
  out = h.core->onMessage("B", h.push(b, 1, std::vector<float>(8, 0.01f)), 50, h.now);
  CHECK(asksEvaluation(out, "A", 2));
  CHECK_FALSE(asksEvaluation(out, "B", 2));
  CHECK_FALSE(h.core->accuracy().has_value());
  // Two reports of model 2: 0.9 on 300 rows, 0.5 on 100 rows (b reports though not asked).
  h.core->onMessage("A", evaluatedPush(h, a, 2, 0.9, 300, 0.2), 50, h.now);
  h.core->onMessage("B", evaluatedPush(h, b, 2, 0.5, 100, 1.0), 50, h.now);
  REQUIRE(h.core->round() == 3);
  // b declared no held-out rows: its 100 are not its own, so only a's count.
  CHECK(h.core->counters().evaluations_unusable == 1);
  REQUIRE(h.core->accuracy().has_value());
  CHECK(*h.core->accuracy() == doctest::Approx(0.9));
  CHECK(h.core->lastRecord().federated_rows == 300);
  CHECK(h.core->lastRecord().evaluated);
  // Model 4: a and c (150 held-out rows) report.
  const uint32_t c = idOf(h.core->onMessage("C", joinWithEval(150, "c"), 10, h.now), "C");
  for (uint64_t r = 3; r < 5; ++r) {
    const bool eval = r == 4;
    h.core->onMessage(
        "A",
        eval ? evaluatedPush(h, a, r, 0.8, 300, 0.2) : h.push(a, r, std::vector<float>(8, 0.01f)),
        50, h.now);
    h.core->onMessage("B", h.push(b, r, std::vector<float>(8, 0.01f)), 50, h.now);
    h.core->onMessage(
        "C",
        eval ? evaluatedPush(h, c, r, 0.5, 150, 1.0) : h.push(c, r, std::vector<float>(8, 0.01f)),
        50, h.now);
  }
  REQUIRE(h.core->round() == 5);
  const double expected = (0.8 * 300 + 0.5 * 150) / 450.0;
  REQUIRE(h.core->accuracy().has_value());
  CHECK(*h.core->accuracy() == doctest::Approx(expected));
  CHECK(h.core->lastRecord().test_accuracy == doctest::Approx(expected));
  CHECK(h.core->lastRecord().federated_rows == 450);
  REQUIRE(h.core->lastFederated().has_value());
  CHECK(h.core->lastFederated()->loss == doctest::Approx((0.2 * 300 + 1.0 * 150) / 450.0));
  CHECK(h.core->lastFederated()->round == 4);
  CHECK(recordOf(*h.core, a).evaluation.accuracy == doctest::Approx(0.8));
  CHECK(recordOf(*h.core, c).evaluation.rows == 150);
  CHECK(h.core->counters().evaluations_unusable == 1);
}

TEST_CASE("an evaluation over more rows than the join declared cannot outweigh the fleet") {
  // One member claiming a perfect score over 2^40 rows would have ended a run at its
  // target_accuracy at once.
  Harness h;
  h.settings.eval_every = 1;
  h.withTimers(10.0, 100.0);
  const uint32_t a = idOf(h.core->onMessage("A", joinWithEval(400, "a"), 10, h.now), "A");
  const uint32_t m = idOf(h.core->onMessage("M", joinWithEval(1, "m"), 10, h.now), "M");
  h.core->onMessage("A", evaluatedPush(h, a, 0, 0.6, 400), 50, h.now);
  h.core->onMessage("M", evaluatedPush(h, m, 0, 1.0, uint64_t(1) << 40), 50, h.now);
  REQUIRE(h.core->round() == 1);
  CHECK(h.core->counters().evaluations_unusable == 1);
  REQUIRE(h.core->accuracy().has_value());
  CHECK(*h.core->accuracy() == doctest::Approx(0.6));
  // Its declared row counts, as any member's.
  h.core->onMessage("A", evaluatedPush(h, a, 1, 0.6, 400), 50, h.now);
  h.core->onMessage("M", evaluatedPush(h, m, 1, 1.0, 1), 50, h.now);
  CHECK(*h.core->accuracy() == doctest::Approx((0.6 * 400 + 1.0) / 401.0));
}

TEST_CASE("unusable or stale evaluations are dropped and counted, the push still counts") {
  Harness h;
  h.settings.eval_every = 1;
  h.withTimers(10.0, 100.0);
  const uint32_t a = idOf(h.core->onMessage("A", joinWithEval(50, "a"), 10, h.now), "A");
  const uint32_t b = idOf(h.core->onMessage("B", joinWithEval(50, "b"), 10, h.now), "B");
  h.core->onMessage("A", evaluatedPush(h, a, 0, 1.5, 50), 50, h.now);  // accuracy > 1
  Message stale = evaluatedPush(h, b, 0, 0.7, 50);
  stale.envelope.mutable_push()->mutable_evaluation()->set_round(7);  // another model's
  h.core->onMessage("B", stale, 50, h.now);
  REQUIRE(h.core->round() == 1);
  CHECK(h.core->lastRecord().participants == 2);
  CHECK(h.core->counters().evaluations_unusable == 2);
  CHECK_FALSE(h.core->accuracy().has_value());
  h.core->onMessage("A", evaluatedPush(h, a, 1, std::nan(""), 50), 50, h.now);
  h.core->onMessage("B", evaluatedPush(h, b, 1, 0.25, 50), 50, h.now);
  CHECK(h.core->counters().evaluations_unusable == 3);
  REQUIRE(h.core->accuracy().has_value());
  CHECK(*h.core->accuracy() == doctest::Approx(0.25));
}

TEST_CASE("a join whose trainer's layout differs from the external model is refused") {
  Harness h;
  h.settings.model = ml::ModelSpec{};
  h.settings.model.kind = "external";
  h.settings.model.tensors = {{"w", {2, 3}}, {"b", {2}}};
  h.settings.model.initial = std::make_shared<const std::vector<float>>(8, 0.5f);
  h.withTimers(10.0, 100.0);
  CHECK(h.core->parameters() == std::vector<float>(8, 0.5f));
  auto joinWith = [&](const std::string& peer, std::vector<ml::TensorShape> layout) {
    Message m = joinWithEval(0, peer);
    for (const auto& t : layout) *m.envelope.mutable_join()->add_tensors() = toWire(t);
    return h.core->onMessage(peer, m, 10, h.now);
  };
  CHECK(hasError(joinWith("X", {{"w", {3, 2}}, {"b", {2}}}), wire::Error::LAYOUT_MISMATCH));
  CHECK(hasError(joinWith("Y", {}), wire::Error::LAYOUT_MISMATCH));  // a built-in trainer
  CHECK(h.core->rejections().at("layout_mismatch") == 2);
  const auto ok = joinWith("Z", {{"w", {2, 3}}, {"b", {2}}});
  bool welcomed = false;
  for (const auto& o : ok) {
    if (!o.message.envelope.has_welcome()) continue;
    welcomed = true;
    CHECK(fromWire(o.message.envelope.welcome().model().tensors()) == h.settings.model.tensors);
  }
  CHECK(welcomed);
}

TEST_CASE("an external trainer's layout is refused by a built-in model") {
  Harness h;
  Message m = joinWithEval(0, "x");
  *m.envelope.mutable_join()->add_tensors() = toWire(ml::TensorShape{"w", {8}});
  CHECK(hasError(h.core->onMessage("X", m, 10, h.now), wire::Error::LAYOUT_MISMATCH));
}
