// Coordinator checkpoints: the bytes restore a core that continues exactly as the original would
// (model, optimizer momentum, round, membership and counters), under a new session that sends
// every worker back through a re-join for the full model. Damaged bytes are refused. And the
// worker's side of a restart: one re-join however many of its messages the new session refuses.
#include <doctest/doctest.h>

#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "common/compression/compressor.hpp"
#include "common/ml/dataset.hpp"
#include "common/util/checksum.hpp"
#include "driven_coordinator.hpp"
#include "push_message.hpp"
#include "tests/unit/worker/driven_worker.hpp"

using namespace tern;

namespace {

struct Cluster {
  double now = 0.0;
  config::CoordinatorSettings settings;
  std::unique_ptr<testing::DrivenCoordinator> core;
  uint64_t session = 42;

  Cluster() {
    settings.min_workers = 2;
    settings.max_rounds = 50;
    settings.model.kind = "softmax";
    settings.model.features = 3;
    settings.model.classes = 2;
    settings.optimizer.lr = 0.3;
    settings.optimizer.momentum = 0.9;  // so a lost velocity would change the next steps
    settings.allocation.budget.mean_ratio = 0.5;
    settings.round_deadline_seconds = 2.0;
    settings.worker_patience_seconds = 5.0;
    settings.checkpoint.every = 3;
    core = fresh();
  }

  std::unique_ptr<testing::DrivenCoordinator> fresh() {
    return std::make_unique<testing::DrivenCoordinator>(settings, ml::makeModel(settings.model),
                                                        nullptr, session, [this] { return now; });
  }

  // Workers "a" (peer "A", 100 samples) and "b" (peer "B") join the core; their ids.
  std::pair<uint32_t, uint32_t> joinAB();

  std::unique_ptr<testing::DrivenCoordinator> restored(const std::string& bytes, uint64_t s) {
    return testing::DrivenCoordinator::restore(
        settings, ml::makeModel(settings.model), nullptr, s, [this] { return now; }, bytes);
  }
};

Message join(const std::string& name, uint64_t samples) {
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_join()->set_worker_name(name);
  m.envelope.mutable_join()->set_sample_count(samples);
  return m;
}

Message push(uint64_t session, uint32_t id, uint64_t round, const std::vector<float>& g) {
  return testing::identityPush(session, id, round, g);
}

const wire::Welcome* welcomeIn(const std::vector<Outgoing>& out, const std::string& peer,
                               Message* carrier = nullptr) {
  for (const auto& o : out) {
    if (o.peer == peer && o.message.envelope.has_welcome()) {
      if (carrier) *carrier = o.message;
      return &o.message.envelope.welcome();
    }
  }
  return nullptr;
}

bool roundStartFor(const std::vector<Outgoing>& out, const std::string& peer) {
  for (const auto& o : out) {
    if (o.peer == peer && o.message.envelope.has_round_start()) return true;
  }
  return false;
}

// A gradient that differs per worker and per round, so every step moves the model differently.
std::vector<float> gradient(size_t d, uint32_t worker, uint64_t round) {
  std::vector<float> g(d);
  for (size_t j = 0; j < d; ++j) {
    g[j] = float((j + 1) * (worker + 2)) * 0.01f - float(round % 5) * 0.03f;
  }
  return g;
}

// Both workers push their gradient for the core's current round.
void runRound(testing::DrivenCoordinator& core, uint64_t session, const std::string& pa, uint32_t a,
              const std::string& pb, uint32_t b, double now) {
  const size_t d = core.parameters().size();
  const uint64_t r = core.round();
  core.onMessage(pa, push(session, a, r, gradient(d, a, r)), 100, now);
  core.onMessage(pb, push(session, b, r, gradient(d, b, r)), 100, now);
  REQUIRE(core.round() == r + 1);
}

std::pair<uint32_t, uint32_t> Cluster::joinAB() {
  const uint32_t a = welcomeIn(core->onMessage("A", join("a", 100), 10, now), "A")->worker_id();
  const uint32_t b = welcomeIn(core->onMessage("B", join("b", 100), 10, now), "B")->worker_id();
  return {a, b};
}

}  // namespace

TEST_CASE("a restored coordinator continues bit for bit as the original, momentum included") {
  Cluster c;
  Message welcome;
  uint32_t a = welcomeIn(c.core->onMessage("A", join("a", 100), 10, c.now), "A")->worker_id();
  uint32_t b = welcomeIn(c.core->onMessage("B", join("b", 300), 10, c.now), "B")->worker_id();
  for (int i = 0; i < 4; ++i) runRound(*c.core, c.session, "A", a, "B", b, c.now);
  // A late push and a malformed message make the counters non-trivial.
  c.core->onMessage("A", push(c.session, a, 0, gradient(8, a, 0)), 100, c.now);
  c.core->onMalformed("Z", "envelope does not parse");

  const std::string bytes = c.core->checkpoint();
  const uint64_t new_session = 777;
  auto resumed = c.restored(bytes, new_session);
  CHECK(resumed->session() == new_session);
  CHECK(resumed->round() == c.core->round());
  CHECK(resumed->parameters() == c.core->parameters());
  CHECK(resumed->uploadBytes() == c.core->uploadBytes());
  CHECK(resumed->fullBytes() == c.core->fullBytes());
  CHECK(resumed->rejections() == c.core->rejections());
  CHECK(resumed->aliveWorkers() == 0);

  // The workers come back under new ROUTER identities and keep their ids; each welcome carries
  // the checkpointed model and round in full.
  auto out = resumed->onMessage("A2", join("a", 100), 10, c.now);
  const auto* wa = welcomeIn(out, "A2", &welcome);
  REQUIRE(wa != nullptr);
  CHECK(wa->worker_id() == a);
  CHECK(wa->session() == new_session);
  CHECK(wa->round() == c.core->round());
  std::vector<float> sent(resumed->parameters().size());
  REQUIRE(bytesToFloats(welcome.payload, sent));
  CHECK(sent == c.core->parameters());
  out = resumed->onMessage("B2", join("b", 300), 10, c.now);
  REQUIRE(welcomeIn(out, "B2") != nullptr);
  CHECK(welcomeIn(out, "B2")->worker_id() == b);
  CHECK(roundStartFor(out, "A2"));

  // Same pushes from here on: the same models. A lost velocity (momentum 0.9) would diverge.
  for (int i = 0; i < 5; ++i) {
    runRound(*c.core, c.session, "A", a, "B", b, c.now);
    runRound(*resumed, new_session, "A2", a, "B2", b, c.now);
    CHECK(resumed->parameters() == c.core->parameters());
  }
  // A newcomer does not take a known worker's id.
  const auto replies = resumed->onMessage("C", join("c", 50), 10, c.now);
  const auto* nw = welcomeIn(replies, "C");
  REQUIRE(nw != nullptr);
  CHECK(nw->worker_id() != a);
  CHECK(nw->worker_id() != b);
}

TEST_CASE("after a restore, old-session messages are refused so every worker re-joins") {
  Cluster c;
  const auto [a, b] = c.joinAB();
  runRound(*c.core, c.session, "A", a, "B", b, c.now);
  auto resumed = c.restored(c.core->checkpoint(), 777);
  const size_t d = resumed->parameters().size();
  const auto before = resumed->parameters();

  // Even over the same identity: the old session is unknown, the model does not move.
  for (const std::string peer : {"A", "A2"}) {
    auto out = resumed->onMessage(peer, push(c.session, a, 1, gradient(d, a, 1)), 100, c.now);
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].message.envelope.has_error());
    CHECK(out[0].message.envelope.error().code() == wire::Error::UNKNOWN_SESSION);
  }
  Message hb;
  hb.envelope = makeEnvelope();
  hb.envelope.mutable_heartbeat()->set_session(c.session);
  hb.envelope.mutable_heartbeat()->set_worker_id(b);
  auto out = resumed->onMessage("B", hb, 10, c.now);
  REQUIRE(out.size() == 1);
  CHECK(out[0].message.envelope.error().code() == wire::Error::UNKNOWN_SESSION);
  CHECK(resumed->parameters() == before);
  CHECK(resumed->round() == 1);
}

TEST_CASE("a resumed coordinator waits for min_workers, or a grace period, before the next round") {
  Cluster c;
  const auto [a, b] = c.joinAB();
  runRound(*c.core, c.session, "A", a, "B", b, c.now);
  const std::string bytes = c.core->checkpoint();

  SUBCASE("both back: the round starts when the second re-joins") {
    auto resumed = c.restored(bytes, 9);
    auto out = resumed->onMessage("A2", join("a", 100), 10, c.now);
    CHECK_FALSE(roundStartFor(out, "A2"));
    out = resumed->onTick();
    CHECK_FALSE(roundStartFor(out, "A2"));
    out = resumed->onMessage("B2", join("b", 100), 10, c.now);
    CHECK(roundStartFor(out, "A2"));
    CHECK(roundStartFor(out, "B2"));
  }
  SUBCASE("one never returns: the other resumes alone after the grace period") {
    auto resumed = c.restored(bytes, 9);
    resumed->onMessage("A2", join("a", 100), 10, c.now);
    c.now += 1.0;
    CHECK_FALSE(roundStartFor(resumed->onTick(), "A2"));
    // Heartbeats keep A alive while it waits.
    Message hb;
    hb.envelope = makeEnvelope();
    hb.envelope.mutable_heartbeat()->set_session(9);
    hb.envelope.mutable_heartbeat()->set_worker_id(a);
    resumed->onMessage("A2", hb, 10, c.now);
    c.now = std::max(c.settings.worker_patience_seconds, c.settings.round_deadline_seconds) + 0.5;
    CHECK(resumed->nextWakeup() <= c.now);
    CHECK(roundStartFor(resumed->onTick(), "A2"));
    const size_t d = resumed->parameters().size();
    resumed->onMessage("A2", push(9, a, 1, gradient(d, a, 1)), 100, c.now);
    CHECK(resumed->round() == 2);
  }
}

TEST_CASE("time_s resumes from the checkpoint's when training resumes, not at the restore") {
  Cluster c;
  const auto [a, b] = c.joinAB();  // training starts at 0
  c.now = 10.0;
  runRound(*c.core, c.session, "A", a, "B", b, c.now);
  CHECK(c.core->lastRecord().time_s == doctest::Approx(10.0));
  const std::string bytes = c.core->checkpoint();

  c.now = 100.0;  // restarted 90 s later
  auto resumed = c.restored(bytes, 9);
  resumed->onMessage("A2", join("a", 100), 10, c.now);
  c.now = 130.0;  // the second worker is back 30 s after the restart: the round starts now
  auto out = resumed->onMessage("B2", join("b", 100), 10, c.now);
  REQUIRE(roundStartFor(out, "B2"));
  c.now = 131.0;
  runRound(*resumed, 9, "A2", a, "B2", b, c.now);
  // Neither the downtime nor the wait for the workers counts as training time.
  CHECK(resumed->lastRecord().time_s == doctest::Approx(11.0));
  // A checkpoint taken during such a wait keeps the restored time, not the wait.
  c.now = 200.0;
  auto waiting = c.restored(bytes, 10);
  c.now = 260.0;
  wire::Checkpoint cp;
  REQUIRE(cp.ParseFromString(server::unsealCheckpoint(waiting->checkpoint())));
  CHECK(cp.elapsed_seconds() == doctest::Approx(10.0));
}

TEST_CASE("a resumed coordinator whose returning worker went again sleeps until one comes back") {
  Cluster c;
  const auto [a, b] = c.joinAB();
  runRound(*c.core, c.session, "A", a, "B", b, c.now);
  auto resumed = c.restored(c.core->checkpoint(), 9);
  resumed->onMessage("A2", join("a", 100), 10, c.now);
  // A goes silent: marked gone after worker_patience_seconds, and the resume grace runs out
  // with nobody back. The next wake-up must not stay in the past (a busy loop).
  c.now += c.settings.worker_patience_seconds + 1.0;
  resumed->onTick();
  REQUIRE(resumed->aliveWorkers() == 0);
  c.now += 1.0;
  resumed->onTick();
  CHECK(resumed->nextWakeup() > c.now);
  // When a worker does come back, the run resumes with it.
  auto out = resumed->onMessage("A3", join("a", 100), 10, c.now);
  for (int i = 0; i < 3 && !roundStartFor(out, "A3"); ++i) {
    c.now = std::max(c.now, resumed->nextWakeup());
    out = resumed->onTick();
  }
  CHECK(roundStartFor(out, "A3"));
}

TEST_CASE("a checkpoint falls due every `every` rounds and when training finishes") {
  Cluster c;
  c.settings.max_rounds = 7;
  c.core = c.fresh();
  const auto [a, b] = c.joinAB();
  std::vector<uint64_t> due_after;
  for (int i = 0; i < 7; ++i) {
    runRound(*c.core, c.session, "A", a, "B", b, c.now);
    if (c.core->checkpointDue()) {
      due_after.push_back(c.core->round());
      c.core->checkpointWritten();
    }
  }
  CHECK(due_after == std::vector<uint64_t>{3, 6, 7});
  REQUIRE(c.core->finished());
  // A finished run restores as finished: a restart does not train past max_rounds.
  auto resumed = c.restored(c.core->checkpoint(), 9);
  CHECK(resumed->finished());
  CHECK(resumed->round() == 7);
  CHECK(resumed->parameters() == c.core->parameters());
  // Given a larger max_rounds the finished run trains on from where it stopped.
  c.settings.max_rounds = 9;
  auto extended = c.restored(c.core->checkpoint(), 9);
  CHECK_FALSE(extended->finished());
  CHECK(extended->parameters() == c.core->parameters());
  extended->onMessage("A2", join("a", 100), 10, c.now);
  extended->onMessage("B2", join("b", 100), 10, c.now);
  runRound(*extended, 9, "A2", a, "B2", b, c.now);
  CHECK(extended->round() == 8);
  CHECK(extended->parameters() != c.core->parameters());
  runRound(*extended, 9, "A2", a, "B2", b, c.now);
  CHECK(extended->finished());
  CHECK(extended->round() == 9);
}

TEST_CASE("a checkpoint at or past max_rounds restores finished, whether or not its run was") {
  // A run stopped mid-way at round 4 and restarted with max_rounds 4 trained a fifth round;
  // restarted with max_rounds 3 it was refused as if the checkpoint were damaged (exit 1, a
  // restart loop under systemd).
  Cluster c;
  c.settings.max_rounds = 10;
  c.core = c.fresh();
  const auto [a, b] = c.joinAB();
  for (int i = 0; i < 4; ++i) runRound(*c.core, c.session, "A", a, "B", b, c.now);
  REQUIRE_FALSE(c.core->finished());
  const std::string mid_run = c.core->checkpoint();
  for (uint64_t limit : {4u, 3u, 1u}) {
    CAPTURE(limit);
    c.settings.max_rounds = limit;
    auto resumed = c.restored(mid_run, 9);
    CHECK(resumed->finished());
    CHECK(resumed->round() == 4);
    CHECK(resumed->parameters() == c.core->parameters());
    // Workers joining find no round to train.
    resumed->onMessage("A2", join("a", 100), 10, c.now);
    resumed->onMessage("B2", join("b", 100), 10, c.now);
    CHECK(resumed->round() == 4);
    CHECK(resumed->parameters() == c.core->parameters());
  }
  // One more round allowed: it trains exactly that one.
  c.settings.max_rounds = 5;
  auto extended = c.restored(mid_run, 9);
  REQUIRE_FALSE(extended->finished());
  extended->onMessage("A2", join("a", 100), 10, c.now);
  extended->onMessage("B2", join("b", 100), 10, c.now);
  runRound(*extended, 9, "A2", a, "B2", b, c.now);
  CHECK(extended->round() == 5);
  CHECK(extended->finished());
}

TEST_CASE("a run that reached its target accuracy restores as finished") {
  // The test rows are alike and half of them of each class: whatever the model, its accuracy is
  // 0.5, so the first evaluation reaches the target and training stops. Before, a restart from
  // that checkpoint trained on until max_rounds, changing the finished model.
  Cluster c;
  c.settings.target_accuracy = 0.5;
  c.settings.eval_every = 1;
  auto test = std::make_shared<ml::Dataset>();
  test->dense = ml::DenseMatrix::Zero(4, 3);
  test->labels = {0, 0, 1, 1};
  test->num_classes = 2;
  auto core = [&](const std::string* bytes, uint64_t session) {
    if (!bytes) {
      return std::make_unique<testing::DrivenCoordinator>(
          c.settings, ml::makeModel(c.settings.model), test, session, [&c] { return c.now; });
    }
    return testing::DrivenCoordinator::restore(
        c.settings, ml::makeModel(c.settings.model), test, session, [&c] { return c.now; }, *bytes);
  };
  auto first = core(nullptr, c.session);
  uint32_t a = welcomeIn(first->onMessage("A", join("a", 100), 10, c.now), "A")->worker_id();
  uint32_t b = welcomeIn(first->onMessage("B", join("b", 100), 10, c.now), "B")->worker_id();
  runRound(*first, c.session, "A", a, "B", b, c.now);
  REQUIRE(first->finished());
  REQUIRE(first->round() < c.settings.max_rounds);
  const std::string bytes = first->checkpoint();
  auto resumed = core(&bytes, 9);
  CHECK(resumed->finished());
  CHECK(resumed->round() == first->round());
  // A target above the accuracy reached trains on.
  c.settings.target_accuracy = 0.6;
  auto raised = core(&bytes, 9);
  CHECK_FALSE(raised->finished());
}

TEST_CASE("the test accuracy is none until an evaluation, and a checkpoint keeps which it is") {
  // The test rows are alike and half of them of each class: whatever the model, its accuracy is
  // 0.5. Before, the coordinator reported 0 before its first evaluation and without test data.
  Cluster c;
  c.settings.eval_every = 1;
  auto test = std::make_shared<ml::Dataset>();
  test->dense = ml::DenseMatrix::Zero(4, 3);
  test->labels = {0, 0, 1, 1};
  test->num_classes = 2;
  for (const bool with_test : {false, true}) {
    CAPTURE(with_test);
    const auto data = with_test ? test : nullptr;
    auto core = std::make_unique<testing::DrivenCoordinator>(
        c.settings, ml::makeModel(c.settings.model), data, c.session, [&c] { return c.now; });
    const auto ra = core->onMessage("A", join("a", 100), 10, c.now);
    const auto rb = core->onMessage("B", join("b", 100), 10, c.now);
    const uint32_t a = welcomeIn(ra, "A")->worker_id();
    const uint32_t b = welcomeIn(rb, "B")->worker_id();
    CHECK_FALSE(core->accuracy().has_value());
    const std::string before = core->checkpoint();
    runRound(*core, c.session, "A", a, "B", b, c.now);
    if (with_test) {
      REQUIRE(core->accuracy().has_value());
      CHECK(*core->accuracy() == doctest::Approx(0.5));
    } else {
      CHECK_FALSE(core->accuracy().has_value());
    }
    const std::string after = core->checkpoint();
    CHECK(c.restored(before, 7)->accuracy().has_value() == false);
    auto resumed = testing::DrivenCoordinator::restore(
        c.settings, ml::makeModel(c.settings.model), data, 7, [&c] { return c.now; }, after);
    CHECK(resumed->accuracy().has_value() == with_test);
    // A checkpoint written before it said: an accuracy above 0 after a round was measured.
    wire::Checkpoint old;
    REQUIRE(old.ParseFromString(server::unsealCheckpoint(after)));
    old.clear_accuracy_known();
    auto from_old = testing::DrivenCoordinator::restore(
        c.settings, ml::makeModel(c.settings.model), data, 7, [&c] { return c.now; },
        server::sealCheckpoint(old.SerializeAsString()));
    CHECK(from_old->accuracy().has_value() == with_test);
  }
}

TEST_CASE("damaged or mismatched checkpoints are refused with a reason") {
  Cluster c;
  const auto [a, b] = c.joinAB();
  runRound(*c.core, c.session, "A", a, "B", b, c.now);
  const std::string good = c.core->checkpoint();
  CHECK_NOTHROW(c.restored(good, 1));

  CHECK_THROWS_AS(c.restored("not a checkpoint at all \xff\xff", 1), std::runtime_error);
  CHECK_THROWS_AS(c.restored(good.substr(0, good.size() / 2), 1), std::runtime_error);

  wire::Checkpoint cp;
  REQUIRE(cp.ParseFromString(server::unsealCheckpoint(good)));
  auto variant = [&](auto edit) {
    wire::Checkpoint v = cp;
    edit(v);
    return server::sealCheckpoint(v.SerializeAsString());
  };
  // A flipped bit in the parameters fails the checksum.
  CHECK_THROWS_AS(c.restored(variant([](wire::Checkpoint& v) {
                               std::string p = v.parameters();
                               p[5] ^= 0x10;
                               v.set_parameters(p);
                             }),
                             1),
                  std::runtime_error);
  // So does one in the momentum buffer (it shapes every later step).
  try {
    c.restored(variant([](wire::Checkpoint& v) {
                 std::string p = v.velocity();
                 p[5] ^= 0x10;
                 v.set_velocity(p);
               }),
               1);
    FAIL("a damaged velocity restored");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("velocity does not match its checksum") != std::string::npos);
  }
  // A checkpoint from before the velocity's checksum still restores.
  CHECK_NOTHROW(c.restored(variant([](wire::Checkpoint& v) { v.clear_velocity_checksum(); }), 1));
  CHECK_THROWS_AS(c.restored(variant([](wire::Checkpoint& v) { v.set_format(2); }), 1),
                  std::runtime_error);
  CHECK_THROWS_AS(
      c.restored(variant([](wire::Checkpoint& v) { v.mutable_model()->set_features(4); }), 1),
      std::runtime_error);
  CHECK_THROWS_AS(c.restored(variant([](wire::Checkpoint& v) { v.set_velocity("abc"); }), 1),
                  std::runtime_error);
  // A round past max_rounds is no damage (max_rounds was lowered): it restores finished, at
  // that round (the checkpoint test above).
  CHECK(c.restored(variant([](wire::Checkpoint& v) { v.set_round(1000); }), 1)->finished());
  // An empty file (a disk filled as it was written) says so, not "format 0".
  try {
    c.restored("", 1);
    FAIL("an empty checkpoint restored");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("empty") != std::string::npos);
  }
  CHECK_THROWS_AS(
      c.restored(variant([](wire::Checkpoint& v) { v.mutable_workers(1)->set_id(0); }), 1),
      std::runtime_error);
  // A worker name that a join would refuse (a forged log line, a C1 control; protobuf itself
  // refuses a name that is not UTF-8): that worker is forgotten, the run restored.
  for (const std::string& bad : {std::string("b\n[info] forged"), std::string("b\xc2\x85")}) {
    const auto restored =
        c.restored(variant([&](wire::Checkpoint& v) { v.mutable_workers(1)->set_name(bad); }), 1);
    REQUIRE(restored->lastRecord().workers.size() == 1);
    CHECK(restored->lastRecord().workers[0].name == "a");
    CHECK(restored->parameters() == c.core->parameters());
  }
  // A link model no link could have is dropped (the worker starts unfitted), the rest restored.
  for (const double bad_b : {-1.0, std::numeric_limits<double>::quiet_NaN(), 1e9}) {
    CAPTURE(bad_b);
    const auto restored = c.restored(variant([&](wire::Checkpoint& v) {
                                       auto* link = v.mutable_workers(1)->mutable_link();
                                       link->set_b_seconds_per_packet(bad_b);
                                       link->set_samples(5);
                                       link->set_packet_bytes(1448);
                                     }),
                                     1);
    REQUIRE(restored->lastRecord().workers.size() == 2);
    CHECK(restored->lastRecord().workers[1].link.samples() == 0);
    CHECK(restored->lastRecord().workers[1].link.b_seconds_per_packet() == 0.0);
  }
  const auto fitted = c.restored(variant([&](wire::Checkpoint& v) {
                                   auto* link = v.mutable_workers(1)->mutable_link();
                                   link->set_b_seconds_per_packet(0.002);
                                   link->set_samples(5);
                                   link->set_packet_bytes(1448);
                                 }),
                                 1);
  CHECK(fitted->lastRecord().workers[1].link.samples() == 5);  // a sound one is kept
}

TEST_CASE("worker ids wrap at 2^32 without handing out one a known worker holds") {
  Cluster c;
  const auto [a, b] = c.joinAB();
  runRound(*c.core, c.session, "A", a, "B", b, c.now);
  wire::Checkpoint cp;
  REQUIRE(cp.ParseFromString(server::unsealCheckpoint(c.core->checkpoint())));
  cp.set_next_worker_id(std::numeric_limits<uint32_t>::max());
  auto resumed = c.restored(server::sealCheckpoint(cp.SerializeAsString()), 9);
  std::set<uint32_t> ids{a, b};
  for (const std::string name : {"x", "y", "z"}) {
    const auto out = resumed->onMessage("P" + name, join(name, 10), 10, c.now);
    const auto* w = welcomeIn(out, "P" + name);  // points into out
    REQUIRE(w != nullptr);
    CHECK(ids.insert(w->worker_id()).second);  // a new id, never a known worker's
  }
  CHECK(ids.count(std::numeric_limits<uint32_t>::max()) == 1);
}

TEST_CASE("a worker answers a burst of unknown-session errors from a restarted coordinator once") {
  config::WorkerSettings ws;
  ws.coordinator_patience_seconds = 5.0;
  ws.compressor.name = "topk";
  double now = 0.0;
  auto shard = std::make_shared<ml::Dataset>(ml::syntheticDense(50, 3, 2, 1));
  testing::DrivenWorker worker(ws, shard, [&now] { return now; });
  auto joins = [](const std::vector<Message>& out) {
    size_t n = 0;
    for (const auto& m : out) n += m.envelope.has_join() ? 1 : 0;
    return n;
  };
  REQUIRE(joins(worker.start()) == 1);

  // Joined to the first coordinator.
  Cluster c;
  Message welcome;
  REQUIRE(welcomeIn(c.core->onMessage("W", worker.start().front(), 10, now), "W", &welcome));
  worker.onMessage(welcome, 100);
  REQUIRE(worker.joined());

  // The coordinator restarts; four queued heartbeats are each refused.
  Message refused;
  refused.envelope = makeEnvelope();
  refused.envelope.mutable_error()->set_code(wire::Error::UNKNOWN_SESSION);
  size_t sent = 0;
  for (int i = 0; i < 4; ++i) sent += joins(worker.onMessage(refused, 10));
  CHECK(sent == 1);
  CHECK(worker.stats().rejoins == 1);
  // Past the patience without a welcome, a refusal does send a new join.
  now += ws.coordinator_patience_seconds + 0.1;
  CHECK(joins(worker.onMessage(refused, 10)) == 1);
}

TEST_CASE(
    "a worker stopped with its join unanswered can leave once the welcome comes, not before") {
  config::WorkerSettings ws;
  ws.compressor.name = "topk";
  auto shard = std::make_shared<ml::Dataset>(ml::syntheticDense(50, 3, 2, 1));
  testing::DrivenWorker worker(ws, shard, [] { return 0.0; });
  CHECK_FALSE(worker.awaitingWelcome());
  const auto join = worker.start();
  CHECK(worker.awaitingWelcome());
  // No Leave can name the worker before a welcome gives it an id and the session.
  CHECK(worker.stop("stopped by signal").empty());

  Cluster c;
  Message welcome;
  REQUIRE(welcomeIn(c.core->onMessage("W", join.front(), 10, c.now), "W", &welcome));
  REQUIRE(c.core->aliveWorkers() == 1);
  worker.onMessage(welcome, 100);
  CHECK_FALSE(worker.awaitingWelcome());
  const auto leave = worker.stop("stopped by signal");
  REQUIRE(leave.size() == 1);
  // The coordinator answers the Leave, and the worker, which its welcome told so, waits for that.
  CHECK(welcome.envelope.welcome().acks_leave());
  CHECK(worker.leaveUnanswered());
  const auto answer = c.core->onMessage("W", leave.front(), 10, c.now);
  CHECK(c.core->aliveWorkers() == 0);
  REQUIRE(answer.size() == 1);
  CHECK(answer.front().peer == "W");
  REQUIRE(answer.front().message.envelope.has_ack());
  CHECK(answer.front().message.envelope.ack().leave());
  CHECK(worker.afterStop(answer.front().message, 10).empty());
  CHECK_FALSE(worker.leaveUnanswered());
}

// Delivers what the coordinator sends to each of `workers` (by peer) to that worker and what the
// worker answers to the coordinator until the coordinator has closed `rounds` more rounds;
// returns what it sent last (not delivered).
std::vector<Outgoing> exchange(Cluster& c,
                               const std::map<std::string, testing::DrivenWorker*>& workers,
                               std::vector<Outgoing> out, size_t rounds) {
  const uint64_t until = c.core->round() + rounds;
  while (!out.empty() && c.core->round() < until) {
    std::vector<Outgoing> next;
    for (const auto& o : out) {
      auto it = workers.find(o.peer);
      if (it == workers.end()) continue;
      for (const auto& m : it->second->onMessage(o.message, 100)) {
        it->second->onSent(m, 100);
        for (auto& back : c.core->onMessage(o.peer, m, 100, c.now)) next.push_back(std::move(back));
      }
    }
    out = std::move(next);
  }
  return out;
}

std::vector<Outgoing> exchange(Cluster& c, testing::DrivenWorker& worker, std::vector<Outgoing> out,
                               size_t rounds) {
  return exchange(c, {{"W", &worker}}, std::move(out), rounds);
}

TEST_CASE("a worker stopped with its coordinator ends on the model: a Finish or a round start") {
  // Ctrl-C on a cluster in one terminal: both stop at once. The worker's push is on its way; the
  // coordinator closes that round with it and either finishes (the Finish carries the round's
  // update) or sends the next round start and then stops (the Finish carries no step: the round
  // start had it). A worker that exited on its own stop without reading either kept a replica a
  // round behind the model.
  for (const bool closes_last_round : {true, false}) {
    CAPTURE(closes_last_round);
    Cluster c;
    c.settings.min_workers = 1;
    c.settings.max_rounds = closes_last_round ? 4 : 50;
    c.core = c.fresh();
    config::WorkerSettings ws;
    ws.compressor.name = "topk";
    auto shard = std::make_shared<ml::Dataset>(ml::syntheticDense(50, 3, 2, 1));
    testing::DrivenWorker worker(ws, shard, [&c] { return c.now; });
    const auto j = worker.start();
    const auto last = exchange(c, worker, c.core->onMessage("W", j.front(), 10, c.now), 3);
    REQUIRE(worker.joined());
    REQUIRE(c.core->round() == 3);
    // Round 3's start reaches the worker, which pushes; then it is stopped.
    std::vector<Message> pushed;
    for (const auto& o : last)
      if (o.peer == "W")
        for (auto& m : worker.onMessage(o.message, 100)) pushed.push_back(std::move(m));
    REQUIRE(worker.replicaRound() == 3);
    const auto leave = worker.stop("stopped by signal");
    REQUIRE(leave.size() == 1);
    CHECK(worker.leaveUnanswered());
    // The push arrives and closes round 3, before the Leave does.
    std::vector<Outgoing> said;
    for (const auto& m : pushed)
      for (auto& o : c.core->onMessage("W", m, 100, c.now)) said.push_back(std::move(o));
    REQUIRE(c.core->round() == 4);
    if (!closes_last_round) {
      for (auto& o : c.core->stop()) said.push_back(std::move(o));
    }
    // The Leave, arriving after the Finish, answers it: nothing more is said.
    CHECK(c.core->onMessage("W", leave.front(), 10, c.now).empty());
    const Message* finish = nullptr;
    size_t round_starts = 0;
    for (const auto& o : said) {
      if (o.peer != "W") continue;
      if (o.message.envelope.has_finish()) finish = &o.message;
      round_starts += o.message.envelope.has_round_start();
      // Nothing new starts at the worker: no gradient, no re-join, nothing sent.
      CHECK(worker.afterStop(o.message, 100).empty());
    }
    REQUIRE(finish != nullptr);
    CHECK(round_starts == (closes_last_round ? 0u : 1u));
    CHECK(finish->payload.empty() == !closes_last_round);
    CHECK(worker.stats().rounds == 4);  // rounds 0-3 computed, none after the stop
    CHECK(worker.stats().rejoins == 0);
    // The Finish ends the wait; the replica is the coordinator's model.
    CHECK_FALSE(worker.leaveUnanswered());
    CHECK(worker.finished());
    CHECK(worker.replicaRound() == 4);
    CHECK(worker.parameters() == c.core->parameters());
  }
}

// Two top-k workers, "worker" and "other", on the same synthetic shard of `features` features.
struct TwoWorkers {
  config::WorkerSettings ws;
  std::shared_ptr<ml::Dataset> shard;
  std::unique_ptr<testing::DrivenWorker> worker, other;
  TwoWorkers(Cluster& c, size_t features)
      : shard(std::make_shared<ml::Dataset>(ml::syntheticDense(50, features, 2, 1))) {
    ws.compressor.name = "topk";
    worker = std::make_unique<testing::DrivenWorker>(ws, shard, [&c] { return c.now; });
    config::WorkerSettings named = ws;
    named.name = "other";
    other = std::make_unique<testing::DrivenWorker>(named, shard, [&c] { return c.now; });
  }
};

// `worker` ("W") and `other` ("V") train rounds 0 and 1 together; in round 2 the other worker's
// push arrives and this worker's is still crossing at the deadline: the round closes without it,
// and its replica is one round's update behind the model.
void behindByOneRound(Cluster& c, testing::DrivenWorker& worker, testing::DrivenWorker& other) {
  const auto first = worker.start();
  REQUIRE(first.size() == 1);
  CHECK(first.front().envelope.join().replica_checksum() == 0);  // nothing held yet
  auto joined = c.core->onMessage("W", first.front(), 10, c.now);
  for (auto& o : c.core->onMessage("V", other.start().front(), 10, c.now))
    joined.push_back(std::move(o));
  const auto next = exchange(c, {{"W", &worker}, {"V", &other}}, std::move(joined), 2);
  REQUIRE(c.core->round() == 2);
  for (const auto& o : next) {
    if (o.peer == "W") worker.onMessage(o.message, 100);
    if (o.peer == "V")
      for (const auto& m : other.onMessage(o.message, 100)) c.core->onMessage("V", m, 100, c.now);
  }
  c.now += c.settings.round_deadline_seconds + 0.1;
  c.core->onTick();
  REQUIRE(c.core->round() == 3);
  REQUIRE(worker.replicaRound() == 2);
}

// Without momentum and under a small cap a round's update is sparse: far below the model.
void sparseSteps(Cluster& c) {
  c.settings.model.features = 100;
  c.settings.optimizer.momentum = 0.0;
  c.settings.allocation.budget.mean_ratio = 0.05;
  c.core = c.fresh();
}

TEST_CASE("a worker re-joining with its replica is welcomed without the whole model") {
  // On a slow downlink a welcome of the whole model is seconds: a worker marked gone while its
  // push crossed re-joins with a replica one round's update behind the model, and gets that
  // update instead; one whose replica is the model (a coordinator resumed from a pause) gets
  // nothing.
  Cluster c;
  sparseSteps(c);
  TwoWorkers two(c, 100);
  auto& worker = *two.worker;
  const auto& ws = two.ws;
  const auto& shard = two.shard;
  behindByOneRound(c, worker, *two.other);
  const size_t full_bytes = c.core->parameters().size() * sizeof(float);
  // The worker re-joins (the coordinator said it does not know it).
  Message unknown;
  unknown.envelope = makeEnvelope();
  unknown.envelope.mutable_error()->set_code(wire::Error::UNKNOWN_SESSION);
  auto rejoin = [&] {
    const auto out = worker.onMessage(unknown, 10);
    REQUIRE(out.size() == 1);
    REQUIRE(out.front().envelope.has_join());
    Message welcome;
    REQUIRE(welcomeIn(c.core->onMessage("W", out.front(), 10, c.now), "W", &welcome));
    CHECK(out.front().envelope.join().replica_round() == worker.replicaRound());
    CHECK(out.front().envelope.join().replica_checksum() == checksum(worker.parameters()));
    return std::pair{out.front(), welcome};
  };
  auto [join1, welcome1] = rejoin();
  CHECK(welcome1.envelope.welcome().model_payload() == wire::Welcome::REPLICA_UPDATE);
  CHECK(welcome1.payload.size() < full_bytes / 4);
  CHECK(worker.onMessage(welcome1, 100).empty());
  REQUIRE(worker.joined());
  CHECK(worker.replicaRound() == 3);
  CHECK(worker.parameters() == c.core->parameters());  // bit for bit, as the whole model would be
  // Again at once: the replica is the model.
  auto [join2, welcome2] = rejoin();
  CHECK(welcome2.envelope.welcome().model_payload() == wire::Welcome::REPLICA_CURRENT);
  CHECK(welcome2.payload.empty());
  CHECK(worker.onMessage(welcome2, 100).empty());
  REQUIRE(worker.joined());
  CHECK(worker.replicaRound() == 3);
  CHECK(worker.parameters() == c.core->parameters());
  // A replica the coordinator's model is not (another checksum, or two rounds behind) gets the
  // whole model.
  for (const auto& [round, sum] :
       {std::pair<uint64_t, uint64_t>{3, 12345}, std::pair<uint64_t, uint64_t>{2, 12345},
        std::pair<uint64_t, uint64_t>{0, checksum(c.core->parameters())}}) {
    Message j = join("x", 50);
    j.envelope.mutable_join()->set_replica_round(round);
    j.envelope.mutable_join()->set_replica_checksum(sum);
    Message welcome;
    REQUIRE(welcomeIn(c.core->onMessage("X", j, 10, c.now), "X", &welcome));
    CHECK(welcome.envelope.welcome().model_payload() == wire::Welcome::FULL_MODEL);
    CHECK(welcome.payload.size() == full_bytes);
  }
  // A worker that holds no replica refuses a welcome without the model (no coordinator keeping
  // the protocol sends one to a join naming none), and its next join, on its retry timer, asks
  // for the whole one.
  testing::DrivenWorker fresh(ws, shard, [&c] { return c.now; });
  REQUIRE(fresh.start().size() == 1);
  Message bare = welcome2;
  bare.envelope.mutable_welcome()->set_join_nonce(0);
  const auto refused = fresh.onMessage(bare, 100);
  CHECK_FALSE(fresh.joined());
  REQUIRE(refused.size() == 1);  // a Leave
  CHECK(refused.front().envelope.has_leave());
  const double before = c.now;
  std::vector<Message> retry;
  while (retry.empty() && c.now < before + 120.0) {
    c.now = std::max(c.now + 0.5, fresh.nextWakeup());
    retry = fresh.onTick();
  }
  REQUIRE(retry.size() == 1);
  CHECK(retry.front().envelope.join().replica_checksum() == 0);
  // A replica that moved since the join (it cannot, but a stale welcome could claim so) is
  // refused too.
  auto [join3, welcome3] = rejoin();
  Message wrong_round = welcome3;
  wrong_round.envelope.mutable_welcome()->set_round(welcome3.envelope.welcome().round() + 1);
  // Refused with a Leave, and asked again at once, naming no replica.
  const auto answer = worker.onMessage(wrong_round, 100);
  REQUIRE(answer.size() == 2);
  CHECK(answer[0].envelope.has_leave());
  REQUIRE(answer[1].envelope.has_join());
  CHECK(answer[1].envelope.join().replica_checksum() == 0);
  CHECK_FALSE(worker.joined());
}

TEST_CASE(
    "a re-joining worker one dense step behind gets the whole model, no larger than the step") {
  // With momentum every coordinate moves each round: the update is the model's size and more.
  Cluster c;
  TwoWorkers two(c, 3);
  auto& worker = *two.worker;
  behindByOneRound(c, worker, *two.other);
  Message unknown;
  unknown.envelope = makeEnvelope();
  unknown.envelope.mutable_error()->set_code(wire::Error::UNKNOWN_SESSION);
  const auto again = worker.onMessage(unknown, 10);
  REQUIRE(again.size() == 1);
  CHECK(again.front().envelope.join().replica_checksum() != 0);
  Message welcome;
  REQUIRE(welcomeIn(c.core->onMessage("W", again.front(), 10, c.now), "W", &welcome));
  CHECK(welcome.envelope.welcome().model_payload() == wire::Welcome::FULL_MODEL);
  CHECK(welcome.payload.size() == c.core->parameters().size() * sizeof(float));
  CHECK(worker.onMessage(welcome, 100).empty());
  CHECK(worker.parameters() == c.core->parameters());
}

TEST_CASE("a worker whose push closed the round and whose round start was lost gets the update") {
  // Both pushes of round 2 count; the round start of round 3 is lost with this worker's
  // connection, and it re-joins holding model_2: one sparse update behind, though no worker
  // was missing from the round.
  Cluster c;
  sparseSteps(c);
  TwoWorkers two(c, 100);
  auto& worker = *two.worker;
  auto joined = c.core->onMessage("W", worker.start().front(), 10, c.now);
  for (auto& o : c.core->onMessage("V", two.other->start().front(), 10, c.now))
    joined.push_back(std::move(o));
  const auto lost = exchange(c, {{"W", &worker}, {"V", two.other.get()}}, std::move(joined), 3);
  REQUIRE(c.core->round() == 3);
  size_t starts_to_w = 0;
  for (const auto& o : lost) starts_to_w += o.peer == "W" && o.message.envelope.has_round_start();
  REQUIRE(starts_to_w == 1);  // not delivered
  REQUIRE(worker.replicaRound() == 2);
  Message unknown;
  unknown.envelope = makeEnvelope();
  unknown.envelope.mutable_error()->set_code(wire::Error::UNKNOWN_SESSION);
  const auto again = worker.onMessage(unknown, 10);
  REQUIRE(again.size() == 1);
  REQUIRE(again.front().envelope.has_join());
  CHECK(again.front().envelope.join().replica_round() == 2);
  Message welcome;
  REQUIRE(welcomeIn(c.core->onMessage("W", again.front(), 10, c.now), "W", &welcome));
  CHECK(welcome.envelope.welcome().model_payload() == wire::Welcome::REPLICA_UPDATE);
  CHECK(welcome.payload.size() < c.core->parameters().size() * sizeof(float) / 4);
  CHECK(worker.onMessage(welcome, 100).empty());
  REQUIRE(worker.joined());
  CHECK(worker.replicaRound() == 3);
  CHECK(worker.parameters() == c.core->parameters());
}
