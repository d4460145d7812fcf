// The worker core with an external trainer's data (docs/python.md): its join says the layout and
// its held-out rows; a welcome of another layout or a built-in model is refused; a round start
// that asks for an evaluation asks the trainer, and the push carries it; a trainer that fails,
// answers with a gradient of another size or a non-finite one sits the round out, counted, with
// nothing pushed, and the next round's good answer is pushed again.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "common/util/rng.hpp"
#include "proto/model_spec.hpp"
#include "worker/worker_core.hpp"

using namespace tern;
using namespace tern::worker;

namespace {

const std::vector<ml::TensorShape> kLayout = {{"w", {2, 3}}, {"b", {2}}};

LocalData externalData() {
  LocalData d;
  d.rows = 120;
  d.label_histogram = {70, 50};
  d.tensors = kLayout;
  d.eval_rows = 30;
  return d;
}

WorkerOptions options() {
  config::WorkerSettings s;
  s.compressor.name = "identity";
  return workerOptions(s);
}

Message welcome(const std::vector<ml::TensorShape>& layout, const std::string& kind = "external") {
  Message m;
  m.envelope = makeEnvelope();
  auto* w = m.envelope.mutable_welcome();
  w->set_worker_id(1);
  w->set_session(7);
  w->mutable_model()->set_kind(kind);
  for (const auto& t : layout) *w->mutable_model()->add_tensors() = toWire(t);
  w->mutable_training()->set_batch_size(8);
  w->set_cap(8);
  m.payload = floatsToBytes(std::vector<float>(8, 0.25f));
  return m;
}

Message roundStart(uint64_t round, bool evaluate) {
  Message m;
  m.envelope = makeEnvelope();
  auto* rs = m.envelope.mutable_round_start();
  rs->set_round(round);
  rs->set_session(7);
  rs->set_full_model(true);
  rs->set_cap(8);
  rs->set_evaluate(evaluate);
  m.payload = floatsToBytes(std::vector<float>(8, 0.25f));
  return m;
}

GradientResult gradientOf(size_t n) {
  GradientResult g;
  g.gradient.assign(n, 0.1f);
  g.loss = 0.3;
  g.rows_used = 8;
  return g;
}

const Message* pushIn(const Effects& e) {
  for (const auto& m : e.send) {
    if (m.envelope.has_push() && !m.envelope.push().probe()) return &m;
  }
  return nullptr;
}

// What a push that sits its round out says (it carries nothing): its failure, or "" when the
// effects hold no such push.
std::string sitOutIn(const Effects& e) {
  const Message* m = pushIn(e);
  if (!m || !m->payload.empty() || !std::isnan(m->envelope.push().local_loss())) return "";
  return m->envelope.push().failure();
}

}  // namespace

TEST_CASE("an external trainer's join says its layout, rows and held-out rows") {
  WorkerCore core(options(), externalData(), 5);
  const Effects e = core.start(0.0);
  REQUIRE(e.send.size() == 1);
  const auto& j = e.send[0].envelope.join();
  CHECK(fromWire(j.tensors()) == kLayout);
  CHECK(j.sample_count() == 120);
  CHECK(j.eval_rows() == 30);
  CHECK(j.partition_fingerprint() == 0);
}

TEST_CASE(
    "a welcome of another layout, or of a built-in model, is refused by an external trainer") {
  WorkerCore core(options(), externalData(), 5);
  core.start(0.0);
  core.onMessage(welcome({{"w", {3, 2}}, {"b", {2}}}), 10, 0.1);
  CHECK_FALSE(core.joined());
  CHECK(core.unfitWelcome().find("layout") != std::string::npos);
  WorkerCore builtin(options(), externalData(), 6);
  builtin.start(0.0);
  builtin.onMessage(welcome({}, "softmax"), 10, 0.1);
  CHECK_FALSE(builtin.joined());
  CHECK(builtin.unfitWelcome().find("external") != std::string::npos);
}

TEST_CASE(
    "a failing trainer sits its rounds out, saying why, and a good answer is pushed with its "
    "evaluation") {
  WorkerCore core(options(), externalData(), 5);
  core.start(0.0);
  core.onMessage(welcome(kLayout), 10, 0.1);
  REQUIRE(core.joined());
  double now = 1.0;
  auto ask = [&](uint64_t round, bool evaluate) {
    const Effects e = core.onMessage(roundStart(round, evaluate), 40, now);
    REQUIRE(e.compute.has_value());
    CHECK(e.compute->evaluate == evaluate);
    return *e.compute;
  };
  auto answer = [&](const GradientRequest& r, GradientResult g) {
    g.request_id = r.id;
    now += 0.5;
    return core.onGradient(g, now);
  };
  GradientResult failed;
  failed.failure = "the trainer did not answer within 2 s";
  CHECK(sitOutIn(answer(ask(0, false), failed)) == failed.failure);
  CHECK(core.stats().trainer_failures == 1);
  CHECK(core.stats().last_trainer_error == failed.failure);
  GradientResult short_one = gradientOf(5);
  CHECK(sitOutIn(answer(ask(1, false), short_one)).find("5 values") != std::string::npos);
  CHECK(core.stats().trainer_failures == 2);
  CHECK(core.stats().last_trainer_error.find("5 values") != std::string::npos);
  GradientResult nan = gradientOf(8);
  nan.gradient[3] = std::nanf("");
  CHECK(sitOutIn(answer(ask(2, false), nan)).find("non-finite") != std::string::npos);
  CHECK(core.stats().trainer_failures == 3);
  CHECK(core.residual().empty());  // nothing of a bad answer was kept
  GradientResult good = gradientOf(8);
  good.evaluation = Evaluation{0.4, 0.75, 30};
  const Effects e = answer(ask(3, true), good);
  const Message* push = pushIn(e);
  REQUIRE(push != nullptr);
  const auto& ev = push->envelope.push().evaluation();
  CHECK(ev.round() == 3);
  CHECK(ev.accuracy() == doctest::Approx(0.75));
  CHECK(ev.rows() == 30);
  CHECK(core.stats().trainer_failures == 3);
  CHECK(core.stats().evaluations == 1);
  // An evaluation that is not one (an accuracy in percent, a NaN loss) is dropped alone: the
  // gradient still goes, no failure counted.
  for (const Evaluation bad : {Evaluation{0.4, 85.0, 30}, Evaluation{std::nan(""), 0.5, 30}}) {
    GradientResult with_bad = gradientOf(8);
    with_bad.evaluation = bad;
    const Effects answered = answer(ask(4 + core.stats().evaluations_unusable, true), with_bad);
    const Message* pushed = pushIn(answered);
    REQUIRE(pushed != nullptr);
    CHECK_FALSE(pushed->payload.empty());
    CHECK_FALSE(pushed->envelope.push().has_evaluation());
  }
  CHECK(core.stats().evaluations_unusable == 2);
  CHECK(core.stats().trainer_failures == 3);
  CHECK(core.stats().evaluations == 1);
}

TEST_CASE("a round asked again after its gradient failed draws other minibatches") {
  // A failure tied to one minibatch (a bad row) must not repeat on every retry of the round.
  WorkerCore core(options(), externalData(), 5);
  core.start(0.0);
  core.onMessage(welcome(kLayout), 10, 0.1);
  REQUIRE(core.joined());
  double now = 1.0;
  auto ask = [&](uint64_t round) {
    now += 0.5;
    const Effects e = core.onMessage(roundStart(round, false), 40, now);
    REQUIRE(e.compute.has_value());
    return *e.compute;
  };
  auto fail = [&](const GradientRequest& r) {
    GradientResult failed;
    failed.request_id = r.id;
    failed.failure = "a bad row";
    now += 0.5;
    CHECK(sitOutIn(core.onGradient(failed, now)) == "a bad row");
  };
  const GradientRequest first = ask(0);
  CHECK(first.attempt == 0);
  fail(first);
  const GradientRequest second = ask(0);
  CHECK(second.attempt == 1);
  CHECK(worker::minibatchSeed(second) != worker::minibatchSeed(first));
  fail(second);
  const GradientRequest third = ask(0);
  CHECK(third.attempt == 2);
  CHECK(worker::minibatchSeed(third) != worker::minibatchSeed(second));
  GradientResult good = gradientOf(8);
  good.request_id = third.id;
  CHECK(pushIn(core.onGradient(good, now + 0.5)) != nullptr);
  const GradientRequest next = ask(1);
  CHECK(next.attempt == 0);
  // Without failures the seed is the one every trainer has always used.
  GradientRequest plain = next;
  CHECK(worker::minibatchSeed(plain) ==
        deriveSeed(plain.plan.seed ^ (uint64_t(plain.worker_id) << 32), plain.round));
}

TEST_CASE("a join refused for its layout is not asked again at once, and asked again later") {
  WorkerCore core(options(), externalData(), 5);
  REQUIRE(core.start(0.0).send.size() == 1);
  Message refusal;
  refusal.envelope = makeEnvelope();
  refusal.envelope.mutable_error()->set_code(wire::Error::LAYOUT_MISMATCH);
  refusal.envelope.mutable_error()->set_text("the model has 8 values, the join's layout 6");
  CHECK(core.onMessage(refusal, 10, 0.5).send.empty());
  CHECK(core.fatalError().empty());
  CHECK_FALSE(core.joined());
  // Said (the daemon's /healthz) until a welcome comes.
  CHECK(core.joinRefusal() ==
        "the coordinator's model has another layout than this worker's trainer: the model has 8 "
        "values, the join's layout 6");
  CHECK(core.onTick(5.0).send.empty());
  // Asked again after the refusal's wait (max(10 s, the heartbeat period)), before the
  // coordinator's patience would have made it re-join as if the coordinator were silent.
  const Effects later = core.onTick(11.0);
  REQUIRE(later.send.size() == 1);
  CHECK(later.send[0].envelope.has_join());
}

TEST_CASE("a gradient request carries the welcome's round deadline, 0 when it said none") {
  for (double deadline : {0.0, 7.5}) {
    CAPTURE(deadline);
    WorkerCore core(options(), externalData(), 5);
    core.start(0.0);
    Message w = welcome(kLayout);
    w.envelope.mutable_welcome()->set_round_deadline_seconds(deadline);
    core.onMessage(w, 10, 0.1);
    REQUIRE(core.joined());
    const Effects e = core.onMessage(roundStart(0, false), 40, 1.0);
    REQUIRE(e.compute.has_value());
    CHECK(e.compute->deadline_seconds == deadline);
  }
}
