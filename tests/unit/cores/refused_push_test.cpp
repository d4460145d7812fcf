// A push the coordinator refuses is never resent by the worker on its own. The coordinator closes
// the round as soon as every worker has answered (pushed or been refused), or asks the refused
// worker again at the deadline. The worker takes back what a refused push carried into its
// error-feedback residual and, asked again, sends that residual, so a refused push is neither
// lost nor counted twice. The cores are driven directly: messages are handed from one to the
// other by the test, the clock is the test's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "common/util/checksum.hpp"
#include "common/util/rng.hpp"
#include "driven_coordinator.hpp"
#include "tests/unit/worker/driven_worker.hpp"

using namespace tern;

namespace {

// Worker i's name and ROUTER identity.
std::string peerOf(size_t i) {
  std::string peer = "w";
  peer += std::to_string(i);
  return peer;
}

struct Cluster {
  double now = 0.0;
  config::CoordinatorSettings cs;
  std::unique_ptr<testing::DrivenCoordinator> coordinator;
  std::vector<std::unique_ptr<testing::DrivenWorker>> workers;
  std::map<std::string, size_t> by_peer;
  // Called on every gradient push before the coordinator sees it; may spoil it.
  std::function<void(size_t worker, Message&)> tamper;
  // Returns true for a gradient push the link should hold back (delivered later by the test).
  std::function<bool(size_t worker, const Message&)> hold;
  std::vector<std::pair<size_t, Message>> held;

  explicit Cluster(size_t n,
                   const std::function<void(config::CoordinatorSettings&)>& configure = {}) {
    cs.min_workers = uint32_t(n);
    cs.max_rounds = 12;
    cs.round_deadline_seconds = 2.0;
    cs.worker_patience_seconds = 3000.0;  // three of the workers' heartbeats
    cs.heartbeat_seconds = 1000.0;
    cs.model.kind = "softmax";
    cs.model.features = 6;
    cs.model.classes = 3;
    cs.optimizer.lr = 0.3;
    cs.training.batch_size = 16;
    cs.training.seed = 7;
    cs.allocation.budget.mean_ratio = 0.25;
    if (configure) configure(cs);
    coordinator = std::make_unique<testing::DrivenCoordinator>(cs, ml::makeModel(cs.model), nullptr,
                                                               77, [this] { return now; });
    config::WorkerSettings ws;
    ws.compressor.name = "topk";
    ws.error_feedback = true;
    ws.error_feedback_auto = false;
    ws.coordinator_patience_seconds = 3000.0;  // three of the coordinator's heartbeats
    ws.heartbeat_seconds = 1000.0;
    ws.link.measure = false;
    for (size_t i = 0; i < n; ++i) {
      ws.name = peerOf(i);
      auto shard = std::make_shared<ml::Dataset>(ml::syntheticDense(80, 6, 3, 11 + i));
      workers.push_back(std::make_unique<testing::DrivenWorker>(ws, shard, [this] { return now; }));
      by_peer[peerOf(i)] = i;
    }
  }

  // Delivers everything that follows from `from_worker`'s messages until the cluster is quiet.
  void pump(size_t from, std::vector<Message> msgs) {
    std::vector<std::pair<size_t, Message>> to_coordinator;
    for (auto& m : msgs) to_coordinator.emplace_back(from, std::move(m));
    while (!to_coordinator.empty()) {
      auto [i, m] = std::move(to_coordinator.front());
      to_coordinator.erase(to_coordinator.begin());
      const size_t bytes = m.envelope.ByteSizeLong() + m.payload.size();
      workers[i]->onSent(m, bytes);
      if (tamper && m.envelope.has_push() && !m.envelope.push().probe()) tamper(i, m);
      if (hold && m.envelope.has_push() && !m.envelope.push().probe() && hold(i, m)) {
        held.emplace_back(i, std::move(m));
        continue;
      }
      deliver(coordinator->onMessage(peerOf(i), m, bytes, now), to_coordinator);
    }
  }

  void deliver(std::vector<Outgoing> out, std::vector<std::pair<size_t, Message>>& back) {
    for (auto& o : out) {
      const size_t i = by_peer.at(o.peer);
      const size_t bytes = o.message.envelope.ByteSizeLong() + o.message.payload.size();
      for (auto& r : workers[i]->onMessage(o.message, bytes)) back.emplace_back(i, std::move(r));
    }
  }

  void start() {
    for (size_t i = 0; i < workers.size(); ++i) pump(i, workers[i]->start());
  }

  void tick() {
    std::vector<std::pair<size_t, Message>> back;
    deliver(coordinator->onTick(), back);
    for (auto& [i, m] : back) pump(i, {std::move(m)});
  }

  // Runs to the end, stepping the clock past each deadline when the cluster is quiet.
  void run() {
    start();
    finish();
  }
  // Runs to the end; every worker's replica must then be the coordinator's model.
  void finishAndCheckReplicas() {
    finish();
    CHECK(coordinator->finished());
    for (const auto& w : workers) {
      CHECK(checksum(w->parameters()) == checksum(coordinator->parameters()));
    }
  }
  void finish() {
    for (int guard = 0; guard < 1000 && !coordinator->finished(); ++guard) {
      now += cs.round_deadline_seconds + 0.01;
      tick();
    }
  }
};

void spoilLoss(Message& m) { m.envelope.mutable_push()->set_local_loss(std::nan("")); }

// The coordinator's answers to worker 0's messages, not yet delivered.
std::vector<Message> toCoordinator(Cluster& c, const std::vector<Message>& msgs) {
  std::vector<Message> back;
  for (const auto& m : msgs) {
    const size_t bytes = m.envelope.ByteSizeLong() + m.payload.size();
    c.workers[0]->onSent(m, bytes);
    for (auto& o : c.coordinator->onMessage(peerOf(0), m, bytes, c.now)) back.push_back(o.message);
  }
  return back;
}

std::vector<Message> toWorker(Cluster& c, const Message& m) {
  return c.workers[0]->onMessage(m, m.envelope.ByteSizeLong() + m.payload.size());
}

Message find(const std::vector<Message>& msgs, bool (wire::Envelope::*has)() const) {
  for (const auto& m : msgs) {
    if ((m.envelope.*has)()) return m;
  }
  FAIL("no such message");
  return {};
}

// Worker 0 joins the cluster's coordinator; the welcome it was sent.
Message joinOne(Cluster& p) {
  auto answers = toCoordinator(p, p.workers[0]->start());
  for (const auto& m : answers) toWorker(p, m);
  REQUIRE(p.workers[0]->joined());
  return find(answers, &wire::Envelope::has_welcome);
}

// A round start of `welcome`'s session for `round`, carrying `payload`.
Message roundStartAfter(const Message& welcome, uint64_t round, std::vector<uint8_t> payload) {
  Message m;
  m.envelope = welcome.envelope;
  m.envelope.clear_welcome();
  auto* start = m.envelope.mutable_round_start();
  start->set_session(welcome.envelope.welcome().session());
  start->set_round(round);
  start->set_cap(3);
  m.payload = std::move(payload);
  return m;
}

void setFloat(Message& m, size_t index, float value) {
  REQUIRE(m.payload.size() >= (index + 1) * sizeof(float));
  std::memcpy(m.payload.mutableData() + index * sizeof(float), &value, sizeof(float));
}

bool finite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("one worker whose push is refused is asked again and the run ends as if it never was") {
  Cluster clean(1);
  clean.run();
  REQUIRE(clean.coordinator->finished());
  CHECK(clean.coordinator->reasked() == 0);

  Cluster c(1);
  size_t spoiled = 0;
  c.tamper = [&](size_t, Message& m) {
    // Rounds 3 and 7 are refused once each; round 3's retry is refused too.
    const uint64_t r = m.envelope.push().round();
    if ((r == 3 && spoiled < 2) || (r == 7 && spoiled == 2)) {
      spoilLoss(m);
      ++spoiled;
    }
  };
  c.run();
  REQUIRE(c.coordinator->finished());
  CHECK(spoiled == 3);
  CHECK(c.coordinator->rejections().at("non_finite_loss") == 3);
  CHECK(c.coordinator->reasked() == 3);
  CHECK(c.workers[0]->stats().repushes == 3);
  CHECK(c.coordinator->round() == clean.coordinator->round());
  // Bit for bit the clean run's model: the refused pushes were never applied and the worker's
  // residual did not count them as sent.
  CHECK(c.coordinator->parameters() == clean.coordinator->parameters());
  CHECK(checksum(c.workers[0]->parameters()) == checksum(c.coordinator->parameters()));
}

// What a push message carries, as the coordinator's decoder reads it.
compression::SparseGradient carriedBy(const Message& m, size_t d) {
  compression::DecodeLimits limits;
  limits.expected_dim = uint32_t(d);
  limits.max_dim = uint32_t(d);
  auto r = compression::decode(m.payload, limits);
  REQUIRE(r.value);
  return *r.value;
}

std::vector<float> plus(std::vector<float> a, const compression::SparseGradient& g) {
  compression::addScaled(g, 1.0f, a);
  return a;
}

TEST_CASE("a round closes as soon as every worker has pushed or been refused") {
  Cluster c(2);
  std::vector<float> owed;  // worker 1's residual plus what its refused push carried
  c.tamper = [&](size_t i, Message& m) {
    if (i == 1 && m.envelope.push().round() == 0) {
      owed = plus(c.workers[1]->residual(), carriedBy(m, c.workers[1]->residual().size()));
      spoilLoss(m);
    }
  };
  // Worker 0's first push waits on its link, so the round is still open after the refusal.
  c.hold = [&](size_t i, const Message& m) { return i == 0 && m.envelope.push().round() == 0; };
  c.start();
  REQUIRE(c.held.size() == 1);
  CHECK(c.coordinator->round() == 0);
  CHECK(c.coordinator->rejections().at("non_finite_loss") == 1);
  // On the refusal worker 1 took back what its push carried.
  CHECK(c.workers[1]->stats().taken_back == 1);
  CHECK(c.workers[1]->residual() == owed);
  // Worker 0's push arrives: everyone has answered, the round closes at once (no clock step),
  // and worker 1 is not asked again.
  c.hold = nullptr;
  auto [i, m] = std::move(c.held.front());
  c.held.clear();
  c.pump(i, {std::move(m)});
  CHECK(c.coordinator->round() >= 1);
  CHECK(c.coordinator->reasked() == 0);
  CHECK(c.workers[1]->stats().repushes == 0);
  c.finishAndCheckReplicas();
}

TEST_CASE("taken back as late, then refused and asked again: nothing counted twice or lost") {
  // Worker 1's round-1 push is late; its round-2 push is refused (and worker 0's too, so both
  // are asked again). The re-push must carry, with the residual it leaves, exactly what the
  // residual owed: the round-2 corrected vector plus the late push's content.
  Cluster c(2);
  const size_t d = c.coordinator->parameters().size();
  std::vector<float> owed;
  int round2_pushes = 0;
  bool checked = false;
  c.hold = [&](size_t i, const Message& m) { return i == 1 && m.envelope.push().round() == 1; };
  c.tamper = [&](size_t i, Message& m) {
    if (m.envelope.push().round() != 2) return;
    if (i == 1 && round2_pushes == 0) {
      // The round-2 corrected vector: its residual plus what it carries.
      owed = plus(c.workers[1]->residual(), carriedBy(m, d));
    }
    if (i == 1 && round2_pushes == 1) {
      // The re-push: its residual plus what it carries is everything owed.
      CHECK(plus(c.workers[1]->residual(), carriedBy(m, d)) == owed);
      checked = true;
    }
    if (i == 1) ++round2_pushes;
    if (round2_pushes <= 1) spoilLoss(m);
  };
  c.start();
  REQUIRE(c.held.size() == 1);
  c.now += c.cs.round_deadline_seconds + 0.01;
  c.tick();  // round 1 closes with worker 0 alone; both round-2 pushes are refused
  REQUIRE(c.coordinator->round() == 2);
  CHECK(c.coordinator->rejections().at("non_finite_loss") == 2);
  CHECK(c.workers[1]->stats().taken_back == 1);
  // The late push arrives and is taken back too: owed grows by what it carried.
  c.hold = nullptr;
  auto [i, late] = std::move(c.held.front());
  c.held.clear();
  owed = plus(owed, carriedBy(late, d));
  c.pump(i, {std::move(late)});
  CHECK(c.workers[1]->stats().taken_back == 2);
  // At the deadline both are asked again.
  c.now += c.cs.round_deadline_seconds + 0.01;
  c.tick();
  CHECK(c.coordinator->reasked() == 2);
  CHECK(checked);
  CHECK(c.workers[1]->stats().repushes == 1);
  c.finishAndCheckReplicas();
}

TEST_CASE("when every push of a round is refused, the workers are asked again at the deadline") {
  Cluster c(2);
  int spoiled = 0;
  c.tamper = [&](size_t, Message& m) {
    if (m.envelope.push().round() == 2 && spoiled < 2) {
      spoilLoss(m);
      ++spoiled;
    }
  };
  c.start();
  // The first rounds close on their own; round 2 waits for its deadline.
  CHECK(c.coordinator->round() == 2);
  c.now += c.cs.round_deadline_seconds / 2;
  c.tick();
  CHECK(c.coordinator->round() == 2);
  CHECK(c.coordinator->reasked() == 0);
  c.now += c.cs.round_deadline_seconds;
  c.tick();
  CHECK(c.coordinator->reasked() == 2);
  CHECK(c.coordinator->round() > 2);
  c.finish();
  CHECK(c.coordinator->finished());
  for (const auto& w : c.workers) {
    CHECK(w->stats().repushes == 1);
    CHECK(checksum(w->parameters()) == checksum(c.coordinator->parameters()));
  }
}

TEST_CASE("a push refused as late goes back into its worker's residual, exactly what it carried") {
  Cluster c(2);
  bool held_once = false;
  // Worker 1's push of round 1 is held back; round 2's pushes wait too, so the late one
  // arrives while round 2 is open.
  c.hold = [&](size_t i, const Message& m) {
    const uint64_t r = m.envelope.push().round();
    if (i == 1 && r == 1 && !held_once) return held_once = true;
    return r == 2;
  };
  c.start();
  REQUIRE(c.held.size() == 1);
  CHECK(c.coordinator->round() == 1);
  // Round 1 closes at its deadline with worker 0 alone; round 2 starts and both push it.
  c.now += c.cs.round_deadline_seconds + 0.01;
  c.tick();
  REQUIRE(c.coordinator->round() == 2);
  REQUIRE(c.held.size() == 3);
  const std::vector<float> before = c.workers[1]->residual();
  REQUIRE(!before.empty());

  // The late push arrives: refused (late), and the worker takes back what it carried, as the
  // coordinator's own decoder reads it.
  auto [i, late] = std::move(c.held.front());
  REQUIRE(i == 1);
  REQUIRE(late.envelope.push().round() == 1);
  c.held.erase(c.held.begin());
  compression::DecodeLimits limits;
  limits.expected_dim = uint32_t(before.size());
  limits.max_dim = uint32_t(before.size());
  auto carried = compression::decode(late.payload, limits);
  REQUIRE(carried.value);
  std::vector<float> expected = before;
  compression::addScaled(*carried.value, 1.0f, expected);
  CHECK(c.coordinator->rejections().count("late_or_future_round") == 0);
  c.pump(i, {std::move(late)});
  CHECK(c.coordinator->rejections().at("late_or_future_round") == 1);
  CHECK(c.workers[1]->stats().taken_back == 1);
  CHECK(c.workers[1]->residual() == expected);
  CHECK(c.workers[0]->stats().taken_back == 0);
  // Round 2's pushes go through and the run ends with every replica on the model.
  c.hold = nullptr;
  auto round2 = std::move(c.held);
  c.held.clear();
  for (auto& [k, m] : round2) c.pump(k, {std::move(m)});
  CHECK(c.coordinator->round() > 2);
  c.finishAndCheckReplicas();
}

TEST_CASE("joins queued while the link was down are answered once: one push, nothing taken back") {
  Cluster c(2);
  // Worker 1's push of round 1 is lost with its link.
  c.hold = [&](size_t i, const Message& m) { return i == 1 && m.envelope.push().round() == 1; };
  c.start();
  REQUIRE(c.coordinator->round() == 1);
  c.held.clear();
  c.hold = nullptr;
  // While the link is down the coordinator stays silent and the worker re-joins on every
  // patience period: three joins queue up.
  std::vector<Message> joins;
  for (int k = 0; k < 3; ++k) {
    c.now += 3000.5;
    auto out = c.workers[1]->onTick();
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].envelope.has_join());
    joins.push_back(std::move(out[0]));
  }
  // The link is back: the coordinator answers every join with a welcome and the round's start.
  std::map<uint64_t, int> pushes_of_round;
  c.tamper = [&](size_t i, Message& m) {
    if (i == 1) ++pushes_of_round[m.envelope.push().round()];
  };
  c.pump(1, std::move(joins));
  // Only the welcome answering the last join is taken: round 1 is pushed once, and no copy of it
  // comes back refused as late into the residual to be applied a second time.
  CHECK(c.workers[1]->stats().stale_welcomes == 2);
  CHECK(pushes_of_round[1] == 1);
  CHECK(c.workers[1]->stats().taken_back == 0);
  CHECK(c.coordinator->rejections().count("late_or_future_round") == 0);
  c.finishAndCheckReplicas();
}

// The other way: a worker never takes a model it cannot hold. A welcome or a full model with a
// non-finite parameter, or an update that would overflow its replica, is refused and counted,
// and the replica stays what it was. The messages are the coordinator's, spoiled on the way.
TEST_CASE("a welcome whose parameters hold NaN or infinity is refused, the real one then taken") {
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    CAPTURE(bad);
    Cluster p(1);
    auto answers = toCoordinator(p, p.workers[0]->start());
    const Message welcome = find(answers, &wire::Envelope::has_welcome);
    Message spoiled = welcome;
    setFloat(spoiled, 3, bad);
    toWorker(p, spoiled);
    CHECK_FALSE(p.workers[0]->joined());
    CHECK(p.workers[0]->stats().rejected == 1);
    toWorker(p, welcome);
    CHECK(p.workers[0]->joined());
    CHECK(finite(p.workers[0]->parameters()));
  }
}

TEST_CASE("a welcome with a model spec no model can be made from is refused, not fatal") {
  Cluster p(1);
  const Message welcome =
      find(toCoordinator(p, p.workers[0]->start()), &wire::Envelope::has_welcome);
  Message spoiled = welcome;
  spoiled.envelope.mutable_welcome()->mutable_model()->set_classes(0);
  toWorker(p, spoiled);
  CHECK(p.workers[0]->fatalError().empty());
  CHECK(p.workers[0]->stats().rejected == 1);
  CHECK_FALSE(p.workers[0]->joined());
  toWorker(p, welcome);
  CHECK(p.workers[0]->joined());
}

namespace {

// Worker 1 starts: its join (saying `fingerprint` when not 0) is refused with `code`, which it
// takes without stopping or asking again at once.
void refusedJoinIsNotFatal(Cluster& p, wire::Error::Code code, uint64_t fingerprint = 0) {
  std::vector<Message> answers;
  for (const auto& m : p.workers[1]->start()) {
    p.workers[1]->onSent(m, m.envelope.ByteSizeLong());
    if (fingerprint != 0) REQUIRE(m.envelope.join().partition_fingerprint() == fingerprint);
    for (auto& o : p.coordinator->onMessage(peerOf(1), m, 10, p.now)) {
      answers.push_back(o.message);
    }
  }
  REQUIRE(answers.size() == 1);
  REQUIRE(answers[0].envelope.error().code() == code);
  CHECK(p.workers[1]->onMessage(answers[0], 10).empty());
  CHECK(p.workers[1]->fatalError().empty());
  CHECK_FALSE(p.workers[1]->finished());
  // Answered: a stop now does not wait for a welcome that will not come.
  CHECK_FALSE(p.workers[1]->awaitingWelcome());
}

}  // namespace

TEST_CASE("a worker the coordinator has no room for is not stopped and asks again later") {
  Cluster p(2);
  p.cs.max_workers = 1;
  p.coordinator = std::make_unique<testing::DrivenCoordinator>(p.cs, ml::makeModel(p.cs.model),
                                                               nullptr, 77, [&p] { return p.now; });
  joinOne(p);
  // Worker 1: no room. Not fatal, no join again at once.
  refusedJoinIsNotFatal(p, wire::Error::TOO_MANY_WORKERS);
  p.now += 5.0;
  CHECK(p.workers[1]->onTick().empty());
  // After max(10 s, its heartbeat period: 1000 s here) it asks again.
  p.now += 1000.0;
  auto again = p.workers[1]->onTick();
  REQUIRE(again.size() == 1);
  CHECK(again[0].envelope.has_join());
}

TEST_CASE("a worker of another partition is not stopped: it asks again and is admitted later") {
  // Worker 0 cut its shard from one partition, worker 1 from another (say data.shard.total 3
  // against 2). Worker 1 is refused while worker 0 is live, keeps asking every max(10 s, its
  // heartbeat period), and is admitted once worker 0 has left (a change rolling through a fleet,
  // or the wrong configuration mended).
  Cluster p(2);
  p.workers[0]->setPartition(11);
  p.workers[1]->setPartition(22);
  joinOne(p);
  refusedJoinIsNotFatal(p, wire::Error::PARTITION_MISMATCH, 22);
  CHECK(p.workers[1]->onTick().empty());
  // Worker 0 leaves; worker 1's next join is welcomed.
  toCoordinator(p, p.workers[0]->stop("reconfigured"));
  p.now += 1000.0;
  auto again = p.workers[1]->onTick();
  REQUIRE(again.size() == 1);
  REQUIRE(again[0].envelope.has_join());
  bool welcomed = false;
  for (auto& o : p.coordinator->onMessage(peerOf(1), again[0], 10, p.now)) {
    welcomed = welcomed || o.message.envelope.has_welcome();
  }
  CHECK(welcomed);
}

TEST_CASE("a full model holding NaN is refused and the replica kept") {
  Cluster p(1);
  const Message welcome = joinOne(p);
  const std::vector<float> before = p.workers[0]->parameters();
  // A round start carrying the whole model, as the coordinator sends to a worker that re-joins.
  Message rs = roundStartAfter(welcome, p.workers[0]->replicaRound(), welcome.payload.toVector());
  rs.envelope.mutable_round_start()->set_full_model(true);
  setFloat(rs, 0, std::nanf(""));
  const uint64_t refused = p.workers[0]->stats().rejected;
  toWorker(p, rs);
  CHECK(p.workers[0]->stats().rejected == refused + 1);
  CHECK(p.workers[0]->parameters() == before);
  CHECK(finite(p.workers[0]->parameters()));
}

TEST_CASE("an update that would overflow the replica is refused, the replica unchanged") {
  Cluster p(1);
  const Message welcome = joinOne(p);
  const size_t d = p.workers[0]->parameters().size();
  // Finite updates of 3e38: the first is applied (the replica is finite, if absurd), the
  // second would take it past FLT_MAX.
  compression::CompressorSpec spec;
  spec.name = "identity";
  auto identity = compression::makeCompressor(spec);
  Rng rng(1);
  const std::vector<float> huge(d, 3e38f);
  auto updateFor = [&](uint64_t round) {
    return roundStartAfter(welcome, round, identity->compress(huge, uint32_t(d), rng).bytes);
  };
  const uint64_t r = p.workers[0]->replicaRound();
  toWorker(p, updateFor(r + 1));
  REQUIRE(p.workers[0]->replicaRound() == r + 1);
  const std::vector<float> before = p.workers[0]->parameters();
  REQUIRE(finite(before));
  const uint64_t refused = p.workers[0]->stats().rejected;
  toWorker(p, updateFor(r + 2));
  CHECK(p.workers[0]->stats().rejected == refused + 1);
  CHECK(p.workers[0]->replicaRound() == r + 1);
  CHECK(p.workers[0]->parameters() == before);
}

namespace {

// Two workers with four local steps each; worker 1's stop check answers `stop` and counts the
// times it is asked, and every gradient push is recorded (worker, round). Started.
struct StopRun {
  static void localSteps(config::CoordinatorSettings& cs) {
    cs.training.local_steps = 4;
    cs.training.local_lr = 0.1;
  }
  Cluster c{2, localSteps};
  std::vector<std::pair<size_t, uint64_t>> pushes;
  size_t asked = 0;
  explicit StopRun(bool stop) {
    c.hold = [this](size_t i, const Message& m) {
      pushes.emplace_back(i, m.envelope.push().round());
      return false;
    };
    c.workers[1]->setStopCheck([this, stop] {
      ++asked;
      return stop;
    });
    c.start();
  }
};

}  // namespace

TEST_CASE(
    "a worker stopped while it computes its gradient sends nothing for the round, and its leave "
    "closes the round without it") {
  SUBCASE("not stopped: asked between the local steps, and the push goes out") {
    StopRun r(false);
    // Every round closed on both pushes, the clock never moved past a deadline.
    CHECK(r.c.coordinator->finished());
    const auto computed = size_t(
        std::count_if(r.pushes.begin(), r.pushes.end(), [](auto& p) { return p.first == 1; }));
    CHECK(computed == r.c.cs.max_rounds);
    // Before the first of four local steps and in the three gaps between them, in each gradient
    // worker 1 computed (a batch of 16 rows is one chunk).
    CHECK(r.asked == 4 * computed);
  }
  SUBCASE("stopped: no push, a leave, and the round closes at once with the other worker") {
    StopRun r(true);
    // Asked once, before the first local step, and nothing went out for round 0.
    CHECK(r.asked == 1);
    CHECK(r.c.coordinator->round() == 0);
    REQUIRE(r.pushes.size() == 1);
    CHECK(r.pushes[0].first == 0);
    const auto leave = r.c.workers[1]->stop("stopped by signal");
    REQUIRE(leave.size() == 1);
    CHECK(leave[0].envelope.has_leave());
    const double before = r.c.now;
    r.c.pump(1, leave);
    // No deadline passed: round 0 closed on the leave, and worker 0 alone ran the rest.
    CHECK(r.c.now == before);
    CHECK(r.c.coordinator->finished());
    CHECK(r.c.coordinator->aliveWorkers() == 1);
    CHECK(r.c.coordinator->lastRecord().participants == 1);
    CHECK(checksum(r.c.workers[0]->parameters()) == checksum(r.c.coordinator->parameters()));
  }
}

TEST_CASE(
    "the coordinator evaluates its test set in chunks, running the daemon's hook between them") {
  Cluster c(1);
  c.cs.eval_every = 5;
  auto test = std::make_shared<ml::Dataset>(ml::syntheticDense(50, 6, 3, 99));
  c.coordinator = std::make_unique<testing::DrivenCoordinator>(c.cs, ml::makeModel(c.cs.model),
                                                               test, 77, [&c] { return c.now; });
  size_t pauses = 0;
  c.coordinator->setBetweenChunks([&] { ++pauses; }, 8);
  c.run();
  REQUIRE(c.coordinator->finished());
  // Rounds 5, 10 and the last (12): seven chunks of 8 rows each, six pauses.
  CHECK(pauses == 3 * 6);
  // The last evaluation is the final model's accuracy on the whole set.
  const auto model = ml::makeModel(c.cs.model);
  REQUIRE(c.coordinator->accuracy());
  CHECK(*c.coordinator->accuracy() == model->accuracy(c.coordinator->parameters(), *test));
}

TEST_CASE("when every worker's trainer fails a round, each is asked again at the deadline") {
  Cluster clean(2);
  clean.run();
  REQUIRE(clean.coordinator->finished());

  Cluster c(2);
  int failures = 0;
  std::vector<uint32_t> attempts;  // of round 3's requests, in the order asked
  for (size_t i = 0; i < 2; ++i) {
    c.workers[i]->setFailure([&](const worker::GradientRequest& r) -> std::string {
      // Round 3 fails on both workers, twice each (the first ask and the first ask again).
      if (r.round == 3) attempts.push_back(r.attempt);
      if (r.round != 3 || failures >= 4) return "";
      ++failures;
      return "the trainer could not fit: boom";
    });
  }
  c.run();
  REQUIRE(c.coordinator->finished());
  CHECK(failures == 4);
  CHECK(c.coordinator->rejections().at("worker_failed") == 4);
  CHECK(c.coordinator->reasked() == 4);
  CHECK(c.workers[0]->stats().trainer_failures == 2);
  CHECK(c.workers[0]->stats().last_trainer_error == "the trainer could not fit: boom");
  CHECK(c.coordinator->round() == clean.coordinator->round());
  // Each ask again drew other minibatches (attempts 1 and 2 after the failed 0 and 1), so the
  // model is not the clean run's; every replica is still the coordinator's.
  std::sort(attempts.begin(), attempts.end());
  CHECK(attempts == std::vector<uint32_t>{0, 0, 1, 1, 2, 2});
  CHECK(c.coordinator->parameters() != clean.coordinator->parameters());
  for (const auto& w : c.workers) {
    CHECK(checksum(w->parameters()) == checksum(c.coordinator->parameters()));
  }
}

TEST_CASE("a failed round's push says why, carries nothing and closes the round at once") {
  Cluster c(2);
  c.workers[1]->setFailure([](const worker::GradientRequest& r) -> std::string {
    // 259 bytes, a two-byte character across byte 256: cut before it, not inside it.
    return r.round == 0 ? std::string(255, 'x') + "\xc3\xa9\xc3\xa9" : "";
  });
  std::vector<Message> failed;
  c.tamper = [&](size_t i, Message& m) {
    if (i == 1 && m.envelope.push().round() == 0) failed.push_back(m);
  };
  c.start();
  REQUIRE(failed.size() == 1);
  const auto& p = failed[0].envelope.push();
  CHECK(failed[0].payload.empty());
  CHECK(std::isnan(p.local_loss()));
  CHECK(p.failure() == std::string(255, 'x'));
  // Round 0 closed on worker 0's push and worker 1's refusal, without waiting for the deadline.
  CHECK(c.coordinator->round() >= 1);
  CHECK(c.coordinator->rejections().at("worker_failed") == 1);
  CHECK(c.coordinator->reasked() == 0);
}

TEST_CASE("a failed round said after the round closed is counted, not taken as a late push") {
  Cluster c(2);
  // Worker 1's failure for round 0 reaches the coordinator only after the round closed without it.
  c.workers[1]->setFailure([](const worker::GradientRequest& r) -> std::string {
    return r.round == 0 ? "the trainer did not answer within 60 s" : "";
  });
  c.hold = [&](size_t i, const Message&) { return i == 1; };  // its link holds all it sends
  c.start();
  REQUIRE(c.held.size() == 1);
  c.now += c.cs.round_deadline_seconds + 0.01;
  c.tick();
  REQUIRE(c.coordinator->round() == 1);  // round 0 closed at its deadline, round 1 waits
  REQUIRE(c.held.size() == 2);
  const uint64_t late_before = c.coordinator->counters().late_pushes;
  auto [i, m] = std::move(c.held.front());
  REQUIRE(!m.envelope.push().failure().empty());
  const size_t bytes = m.envelope.ByteSizeLong();
  const auto answers = c.coordinator->onMessage(peerOf(i), m, bytes, c.now);
  CHECK(answers.empty());  // nothing to refuse: its round is over
  CHECK(c.coordinator->rejections().at("worker_failed") == 1);
  CHECK(c.coordinator->counters().late_pushes == late_before);
}
