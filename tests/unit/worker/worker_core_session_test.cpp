// The worker core's session with the coordinator: a re-join on the replica it holds, silences
// waited out longer over a live connection, heartbeat and patience fitted to the coordinator's,
// and its end: a Finish answered with a Leave, a stopping worker waiting for the Leave's answer
// only from a coordinator that gives one.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/util/checksum.hpp"
#include "tests/unit/worker/worker_rig.hpp"

using namespace tern;
using namespace tern::testing;

TEST_CASE("a welcome without the model is taken only as the replica the join named") {
  Rig rig;
  rig.welcome();
  REQUIRE(rig.core->joined());
  rig.send(rig.roundStart(0));
  Message unknown;
  unknown.envelope = makeEnvelope();
  unknown.envelope.mutable_error()->set_code(wire::Error::UNKNOWN_SESSION);
  auto rejoined = [&] {
    const auto out = rig.core->onMessage(unknown, 10);
    REQUIRE(out.size() == 1);
    REQUIRE(out.front().envelope.has_join());
    return out.front().envelope.join();
  };
  const auto join = rejoined();
  CHECK(join.replica_round() == 0);
  CHECK(join.replica_checksum() == checksum(rig.core->parameters()));
  const auto held = rig.core->parameters();
  auto bare = [&](uint64_t round, std::vector<uint8_t> payload) {
    Message m;
    m.envelope = makeEnvelope();
    auto* w = m.envelope.mutable_welcome();
    w->set_worker_id(1);
    w->set_session(rig.session + 1);
    w->mutable_model()->set_kind("softmax");
    w->mutable_model()->set_features(rig.features);
    w->mutable_model()->set_classes(2);
    w->mutable_training()->set_batch_size(8);
    w->set_cap(uint32_t(held.size()));
    w->set_round(round);
    w->set_model_payload(wire::Welcome::REPLICA_CURRENT);
    m.payload = std::move(payload);
    return m;
  };
  // Bytes where there should be none, or a round the replica is not at: refused (a Leave).
  for (const auto& m : {bare(0, {1, 2, 3, 4}), bare(1, {})}) {
    Rig fresh;  // a worker at round 0 that re-joined, as above
    fresh.welcome();
    fresh.send(fresh.roundStart(0));
    const auto out = fresh.core->onMessage(unknown, 10);
    REQUIRE(out.size() == 1);
    const auto answer = fresh.core->onMessage(m, 10);
    CHECK_FALSE(fresh.core->joined());
    REQUIRE(answer.size() == 2);  // a Leave, and a join at once that names no replica
    CHECK(answer.front().envelope.has_leave());
    CHECK(answer.back().envelope.join().replica_checksum() == 0);
    // The same again, to a join that named no replica: a coordinator out of the protocol, which
    // gets a Leave and the worker's usual retry, not a join per welcome.
    const auto again = fresh.core->onMessage(m, 10);
    REQUIRE(again.size() == 1);
    CHECK(again.front().envelope.has_leave());
  }
  {
    // A stopping worker (its welcome taken in the wait after the stop) only refuses: no join.
    Rig stopping;
    stopping.welcome();
    stopping.send(stopping.roundStart(0));
    REQUIRE(stopping.core->onMessage(unknown, 10).size() == 1);
    // Stopped while its join is unanswered: nothing to say yet.
    REQUIRE(stopping.core->stop("stopped by signal").empty());
    const auto answer = stopping.core->onMessage(bare(1, {}), 10);
    REQUIRE(answer.size() == 1);
    CHECK(answer.front().envelope.has_leave());
  }
  // The replica as it was: joined on it, under the new session.
  CHECK(rig.core->onMessage(bare(0, {}), 10).empty());
  CHECK(rig.core->joined());
  CHECK(rig.core->session() == rig.session + 1);
  CHECK(rig.core->parameters() == held);
}

TEST_CASE("silences over a live connection are waited out longer, up to 8 times the patience") {
  // Patience 30 s. A join whose connection came up and then heard nothing may have a welcome
  // of a large model on its way down a slow link: the re-joins come after 30, 60, 120, 240 and
  // then every 240 s. Without a connection (a cut link) the patience stays 30 s; a message heard
  // brings it back too.
  Rig rig;
  auto rejoinsAt = [&](double t) {
    rig.now = t;
    const uint64_t before = rig.core->stats().rejoins;
    rig.core->onTick();
    return rig.core->stats().rejoins - before;
  };
  double t = 0.0;
  for (const double wait : {30.0, 60.0, 120.0, 240.0, 240.0}) {
    CAPTURE(wait);
    rig.core->connectionUp();
    CHECK(rig.core->silenceAllowed() == doctest::Approx(wait));
    CHECK(rig.core->nextWakeup() == doctest::Approx(t + wait));
    CHECK(rejoinsAt(t + wait - 0.01) == 0);
    CHECK(rejoinsAt(t + wait) == 1);
    t += wait;
  }
  // No handshake through the last wait: the next one is the patience.
  CHECK(rig.core->silenceAllowed() == doctest::Approx(240.0));
  CHECK(rejoinsAt(t + 240.0) == 1);
  t += 240.0;
  CHECK(rig.core->silenceAllowed() == doctest::Approx(30.0));
  CHECK(rejoinsAt(t + 30.0) == 1);
  t += 30.0;
  // Longer again over a live connection, and back to the patience once anything is heard.
  rig.core->connectionUp();
  CHECK(rejoinsAt(t + 30.0) == 1);
  t += 30.0;
  CHECK(rig.core->silenceAllowed() == doctest::Approx(60.0));
  rig.now = t + 10.0;
  rig.welcome();
  REQUIRE(rig.core->joined());
  CHECK(rig.core->silenceAllowed() == doctest::Approx(30.0));
  // The connection the worker joined over says nothing of a later silence (a cut, a blackhole):
  // without a handshake since the welcome the re-join after it keeps the patience.
  t = rig.now;
  CHECK(rejoinsAt(t + 30.0) == 1);
  CHECK(rig.core->silenceAllowed() == doctest::Approx(30.0));
}

TEST_CASE("a worker fits its heartbeat and patience to the coordinator's, said in the welcome") {
  // Settings that each pass their ranges but not together: heartbeats every 20 s against a
  // coordinator that marks a worker gone after 10 s of silence, and a patience of 30 s against a
  // coordinator that heartbeats every 20 s.
  Rig rig(0, 2, 3, [](config::WorkerSettings& s) { s.heartbeat_seconds = 20.0; });
  rig.coordinator_heartbeat = 20.0;
  rig.coordinator_patience = 10.0;
  rig.welcome();
  REQUIRE(rig.core->joined());
  CHECK(rig.core->heartbeatInterval() == doctest::Approx(10.0 / 3.0));
  CHECK(rig.core->silenceAllowed() == doctest::Approx(60.0));
  // Quiet after the welcome: heartbeats every 10/3 s, no re-join before 60 s.
  size_t beats = 0;
  for (double t = 0.1; t < 59.9; t += 0.1) {
    rig.now = t;
    for (const auto& m : rig.core->onTick()) {
      beats += m.envelope.has_heartbeat() ? 1 : 0;
      rig.core->onSent(m, m.envelope.ByteSizeLong());
    }
  }
  CHECK(beats == 17);  // at 10/3, 20/3, ... 170/3 s
  CHECK(rig.core->stats().rejoins == 0);
  rig.now = 60.0;
  rig.core->onTick();
  CHECK(rig.core->stats().rejoins == 1);
  // Values not said, or not usable, leave the settings as they are.
  for (const double v : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    Rig plain(0, 2, 3, [](config::WorkerSettings& s) { s.heartbeat_seconds = 20.0; });
    plain.coordinator_heartbeat = v;
    plain.coordinator_patience = v;
    plain.welcome();
    REQUIRE(plain.core->joined());
    CHECK(plain.core->heartbeatInterval() == 20.0);
    CHECK(plain.core->silenceAllowed() == 30.0);
  }
}

TEST_CASE("a worker answers the coordinator's Finish with a Leave, so the coordinator may exit") {
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_finish()->set_round(0);
  {
    // Told before it was welcomed: nothing to answer for, no id to say.
    Rig early;
    CHECK(early.core->onMessage(m, 0).empty());
    CHECK(early.core->finished());
  }
  Rig rig;
  const auto join = rig.core->start();
  REQUIRE(join.size() == 1);
  CHECK(join[0].envelope.join().acks_finish());  // the coordinator waits only for those that say
  rig.welcome();
  REQUIRE(rig.core->joined());
  const auto out = rig.core->onMessage(m, 0);
  CHECK(rig.core->finished());
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].envelope.has_leave());
  CHECK(out[0].envelope.leave().session() == rig.session);
  CHECK(out[0].envelope.leave().worker_id() == 1);
  CHECK(out[0].envelope.leave().reason() == "finished");
  CHECK(rig.core->stop("stopped by signal").empty());  // said once
}

TEST_CASE("a stopping worker waits for its Leave's answer only from a coordinator that gives one") {
  Message leave_ack;
  leave_ack.envelope = makeEnvelope();
  leave_ack.envelope.mutable_ack()->set_leave(true);
  auto error = [](wire::Error::Code code, bool about_push, uint64_t round = 0) {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_error()->set_code(code);
    m.envelope.mutable_error()->set_about_push(about_push);
    m.envelope.mutable_error()->set_round(round);
    return m;
  };
  {
    // An older coordinator (its welcome does not say it answers Leaves): nothing to wait for.
    Rig rig;
    rig.welcome();
    REQUIRE(rig.core->stop("stopped by signal").size() == 1);
    CHECK_FALSE(rig.core->leaveUnanswered());
  }
  Rig rig;
  rig.acks_leave = true;
  rig.welcome();
  rig.send(rig.roundStart(0));
  const uint64_t rounds = rig.core->stats().rounds;
  REQUIRE(rig.core->stop("stopped by signal").size() == 1);
  CHECK(rig.core->leaveUnanswered());
  // Nothing new starts while it waits: no gradient for a round start, no re-join for a refusal
  // or a heartbeat of another session, nothing sent.
  Message start;
  start.envelope = makeEnvelope();
  start.envelope.mutable_round_start()->set_round(1);
  start.envelope.mutable_round_start()->set_session(rig.session);
  start.envelope.mutable_round_start()->set_full_model(true);
  start.payload = floatsToBytes(rig.core->parameters());
  CHECK(rig.core->afterStop(start, 10).empty());
  CHECK(rig.core->stats().rounds == rounds);
  // Its model is taken, though: the coordinator counts the replica as at round 1.
  CHECK(rig.core->replicaRound() == 1);
  CHECK(rig.core->afterStop(error(wire::Error::UNKNOWN_SESSION, true, 0), 10).empty());
  Message beat;
  beat.envelope = makeEnvelope();
  beat.envelope.mutable_heartbeat()->set_session(rig.session + 1);
  CHECK(rig.core->afterStop(beat, 10).empty());
  CHECK(rig.core->stats().rejoins == 0);
  // A push refused (late, or from a worker marked gone) is not the Leave's answer.
  CHECK(rig.core->leaveUnanswered());
  CHECK(rig.core->afterStop(leave_ack, 10).empty());
  CHECK_FALSE(rig.core->leaveUnanswered());
  // A coordinator that no longer knows the worker, or has finished, refuses the Leave: no other
  // answer comes.
  for (const auto code : {wire::Error::UNKNOWN_SESSION, wire::Error::SHUTTING_DOWN}) {
    Rig other;
    other.acks_leave = true;
    other.welcome();
    REQUIRE(other.core->stop("stopped by signal").size() == 1);
    CHECK(other.core->afterStop(error(code, false), 10).empty());
    CHECK_FALSE(other.core->leaveUnanswered());
  }
  {
    // The Leave refusing a welcome (a model the shard cannot train) is answered too.
    Rig refusing(0, 2, 3);
    refusing.acks_leave = true;
    refusing.features = 4;  // the welcome's model has 4 features, the shard 3
    refusing.welcome();
    REQUIRE_FALSE(refusing.core->joined());
    CHECK(refusing.core->leaveUnanswered());
    CHECK(refusing.core->onMessage(leave_ack, 10).empty());
    CHECK_FALSE(refusing.core->leaveUnanswered());
  }
  // So is it when a Finish or a refusal of the Leave comes first (a finished coordinator answers
  // no Leave): the stopping worker does not wait for an ack that cannot come.
  Message finish;
  finish.envelope = makeEnvelope();
  finish.envelope.mutable_finish()->set_round(0);
  for (const Message& first : {finish, error(wire::Error::SHUTTING_DOWN, false),
                               error(wire::Error::UNKNOWN_SESSION, false)}) {
    Rig refusing(0, 2, 3);
    refusing.acks_leave = true;
    refusing.features = 4;
    refusing.welcome();
    REQUIRE(refusing.core->leaveUnanswered());
    refusing.core->onMessage(first, 10);
    CHECK_FALSE(refusing.core->leaveUnanswered());
  }
}
