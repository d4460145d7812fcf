// The worker's probe scheduling, driven with a fake clock over a modelled link: probes go out one
// at a time and never while a push or probe is unacknowledged, ride ahead of a push (never
// behind one), exploration is decided on a push's ack, and a send that is never acknowledged
// gives no sample. The fit survives a re-join, which carries it, and an answer is timed only
// where it says the link's time: an ack's hold that is no time is refused, a push refused as it
// arrives is timed like an acknowledged one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/worker/worker_rig.hpp"

using namespace tern;
using namespace tern::testing;

namespace {
// A model whose dense push (24,002 floats, 67 packets) spans more than the largest calibration
// probe, so every probe size can change a push's choice and the whole train is wanted.
constexpr uint32_t kWide = 12000;
}  // namespace

TEST_CASE("the calibration train goes one probe ahead of each push, never behind or unacked") {
  Rig rig(0, 2, kWide);
  rig.welcome();
  auto out = rig.roundStart(0);
  REQUIRE(out.size() == 2);
  CHECK(isProbe(out[0]));
  CHECK(isPush(out[1]));
  rig.send(out);

  // A round that starts while something is still unacknowledged (here: all of round 0) sends
  // its push alone; the next probe waits.
  out = rig.roundStart(1);
  REQUIRE(out.size() == 1);
  CHECK(isPush(out[0]));
  rig.send(out);
  rig.deliverAcks();

  for (uint64_t r = 2; r < 12; ++r) rig.round(r);
  CHECK(rig.probes_sent_while_unacked == 0);
  CHECK(rig.probes_sent_behind_push == 0);

  // The default train: 1, 4, 16, 64 packets, twice, interleaved; each probe fills exactly its
  // packets on the wire, envelope and frame headers included.
  std::vector<size_t> sizes;
  for (const auto& p : rig.probes_sent) sizes.push_back(onWire(p));
  REQUIRE(sizes.size() >= 8);
  const std::vector<size_t> expected = {1, 4, 16, 64, 1, 4, 16, 64};
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(sizes[i] == expected[i] * kPacket);
  }
  // The fit sees the link the test built (a per-packet time of 4 ms) from probes and pushes.
  auto fit = rig.core->link().fit();
  CHECK(fit.valid);
  CHECK(std::abs(fit.b / rig.b - 1.0) < 0.05);
}

namespace {

// The packets of every probe a worker sent over `rounds` rounds on a link of latency a and b a
// packet, with calibration_max_seconds at 0.25; `skipped`: the calibration probes it passed over.
std::vector<size_t> probesOn(double a, double b, uint64_t rounds, uint64_t& skipped) {
  Rig rig(0, 2, kWide, [](config::WorkerSettings& s) { s.link.calibration_max_seconds = 0.25; });
  rig.a = a;
  rig.b = b;
  rig.welcome();
  for (uint64_t r = 0; r < rounds; ++r) rig.round(r);
  CHECK(rig.probes_sent_while_unacked == 0);
  skipped = rig.core->link().skippedCalibrationProbes();
  std::vector<size_t> sent;
  for (const auto& p : rig.probes_sent) sent.push_back(packets(onWire(p)));
  return sent;
}

}  // namespace

TEST_CASE("on a slow link the calibration probes that would take too long are skipped") {
  // 1 Mbit/s: a packet in 11.6 ms, so 64 packets would hold the link 0.75 s; the 1-, 4- and
  // 16-packet probes (at most 0.19 s) go out, and the line through the two largest timed puts
  // the 64-packet ones past calibration_max_seconds.
  uint64_t skipped = 0;
  const auto sent = probesOn(0.010, 0.0116, 20, skipped);
  REQUIRE(sent.size() >= 6);
  CHECK(std::vector<size_t>(sent.begin(), sent.begin() + 6) ==
        std::vector<size_t>{1, 4, 16, 1, 4, 16});
  CHECK(std::count(sent.begin(), sent.end(), size_t{64}) == 0);
  CHECK(skipped == 2);
}

TEST_CASE("on a fast link the whole calibration train goes out") {
  // 0.5 ms a packet: 64 packets in 34 ms, well within calibration_max_seconds.
  uint64_t skipped = 0;
  const auto sent = probesOn(0.002, 0.0005, 12, skipped);
  REQUIRE(sent.size() >= 8);
  const std::vector<size_t> expected = {1, 4, 16, 64, 1, 4, 16, 64};
  CHECK(std::vector<size_t>(sent.begin(), sent.begin() + 8) == expected);
  CHECK(skipped == 0);
}

TEST_CASE(
    "the train stops at the size covering the largest push, and a one-packet push probes none") {
  // features 3: the whole model (8 floats) is one packet, so every push the worker may send
  // costs a + b and no probe could change one: none goes out, the train is counted skipped.
  Rig small;
  small.welcome();
  for (uint64_t r = 0; r < 40; ++r) small.round(r);
  CHECK(small.probes_sent.empty());
  CHECK(small.core->link().skippedCalibrationProbes() == 8);
  // features 1000: a dense push of 2,002 floats spans 6 packets; the train sends 1, 4 and 16
  // packets (16 covers 6) twice, never 64.
  Rig mid(0, 2, 1000);
  mid.welcome();
  for (uint64_t r = 0; r < 12; ++r) mid.round(r);
  std::vector<size_t> sizes;
  for (const auto& p : mid.probes_sent) sizes.push_back(packets(onWire(p)));
  REQUIRE(sizes.size() >= 6);
  const std::vector<size_t> expected = {1, 4, 16, 1, 4, 16};
  CHECK(std::vector<size_t>(sizes.begin(), sizes.begin() + 6) == expected);
  CHECK(std::count(sizes.begin(), sizes.end(), size_t{64}) == 0);
  CHECK(mid.core->link().skippedCalibrationProbes() == 2);
  CHECK(mid.core->link().fit().valid);
  // A coordinator that plans caps by link time (its welcome says so) reads the link beyond the
  // cap: the one-packet worker sends the whole train.
  Rig planned;
  planned.plans_by_link_time = true;
  planned.welcome();
  for (uint64_t r = 0; r < 12; ++r) planned.round(r);
  std::vector<size_t> planned_sizes;
  for (const auto& p : planned.probes_sent) planned_sizes.push_back(packets(onWire(p)));
  REQUIRE(planned_sizes.size() >= 8);
  CHECK(std::vector<size_t>(planned_sizes.begin(), planned_sizes.begin() + 8) ==
        std::vector<size_t>{1, 4, 16, 64, 1, 4, 16, 64});
  CHECK(planned.core->link().skippedCalibrationProbes() == 0);
}

TEST_CASE("a push sent behind a probe does not pull the fitted latency towards zero") {
  // A 10 ms path at 11.6 ms a packet: a push that waits behind the probe ahead of it arrives
  // b * its packets after the probe, without a second latency. Timed from the probe's ack it
  // was a sample of b x alone; after the calibration train the fit's a came out near 1 ms.
  Rig rig(0, 2, kWide);
  rig.pipelined = true;
  rig.a = 0.010;
  rig.b = 0.0116;
  rig.latency = 0.0;
  rig.welcome();
  for (uint64_t r = 0; r < 12; ++r) rig.round(r);
  const auto fit = rig.core->link().fit();
  REQUIRE(fit.valid);
  CHECK(std::abs(fit.b / rig.b - 1.0) < 0.05);
  CHECK(std::abs(fit.a / rig.a - 1.0) < 0.1);
}

TEST_CASE("a re-join sends the calibration train again only when the fit had not been made") {
  // A flapping connection re-joins again and again: the fit survives each re-join, and the
  // train (2 x 85 packets) is not paid for again.
  Rig rig(0, 2, kWide);
  rig.welcome();
  for (uint64_t r = 0; r < 12; ++r) rig.round(r);
  REQUIRE(rig.core->link().fit().valid);
  const size_t probes_before = rig.probes_sent.size();
  REQUIRE(probes_before >= 8);
  // A coordinator restarted under a new session: the worker re-joins.
  REQUIRE(rig.newSession().at(0).envelope.has_join());
  rig.welcome();
  REQUIRE(rig.core->joined());
  for (uint64_t r = 12; r < 20; ++r) rig.round(r);
  size_t train_sized = 0;  // probes of the train's first size, one packet
  for (size_t i = probes_before; i < rig.probes_sent.size(); ++i) {
    train_sized += packets(onWire(rig.probes_sent[i])) == 1;
  }
  CHECK(train_sized == 0);
  CHECK(rig.probes_sent.size() - probes_before < 8);

  // Cut short before the fit could tell a from b, the train goes on at the next join from the
  // probe it had reached, and comes round to the one it sent before.
  Rig early(0, 2, kWide);
  early.welcome();
  early.round(0);
  REQUIRE_FALSE(early.core->link().fit().valid);
  REQUIRE(early.newSession().at(0).envelope.has_join());
  early.welcome();
  const size_t sent_before = early.probes_sent.size();
  REQUIRE(sent_before == 1);
  early.round(1);
  REQUIRE(early.probes_sent.size() == sent_before + 1);
  CHECK(packets(onWire(early.probes_sent.back())) == 4);
  for (uint64_t r = 2; r < 12; ++r) early.round(r);
  std::vector<size_t> sizes;
  for (const auto& p : early.probes_sent) sizes.push_back(packets(onWire(p)));
  REQUIRE(sizes.size() >= 8);
  const std::vector<size_t> expected = {1, 4, 16, 64, 1, 4, 16, 64};
  CHECK(std::vector<size_t>(sizes.begin(), sizes.begin() + 8) == expected);
  CHECK(early.core->link().fit().valid);
}

TEST_CASE("a worker that re-joins after every push still fits its link") {
  // A push slower than the coordinator's patience: the worker is marked gone while it sends and
  // re-joins after each push, so each join sees one probe of the train (a push behind a probe
  // is not timed). Restarted at every join, the train only ever timed its first size, one
  // packet, and the fit that would let the worker send less never came.
  Rig rig(0, 2, kWide);
  rig.welcome();
  for (uint64_t r = 0; r < 12; ++r) {
    rig.round(r);
    REQUIRE(rig.newSession().at(0).envelope.has_join());
    rig.welcome();
    REQUIRE(rig.core->joined());
  }
  std::set<size_t> sizes;
  for (const auto& p : rig.probes_sent) sizes.insert(packets(onWire(p)));
  CHECK(sizes == std::set<size_t>{1, 4, 16, 64});
  const auto fit = rig.core->link().fit();
  REQUIRE(fit.valid);
  CHECK(std::abs(fit.b / rig.b - 1.0) < 0.05);
}

TEST_CASE("exploration probes are decided on a push's ack and go out ahead of the next push") {
  Rig rig(0, 2, kWide);
  rig.welcome();
  for (uint64_t r = 0; r < 80; ++r) rig.round(r);
  // 8 calibration probes, then pushes all of one size (the whole model, 67 packets) call for
  // exploration.
  REQUIRE(rig.probes_sent.size() > 8);
  CHECK(rig.probes_sent_while_unacked == 0);
  CHECK(rig.probes_sent_behind_push == 0);
  for (size_t i = 8; i < rig.probes_sent.size(); ++i) {
    // A clearly different size from the pushes: at most a quarter of their packets.
    CHECK(4 * packets(onWire(rig.probes_sent[i])) <= 67);
  }

  // A round whose push is not yet acked: its exploration (if due) is not decided, so the next
  // round, started before that ack, carries no probe.
  auto out = rig.roundStart(80);
  rig.send(out);
  out = rig.roundStart(81);
  CHECK(std::none_of(out.begin(), out.end(), isProbe));
  rig.send(out);
  rig.deliverAcks();
  CHECK(std::abs(rig.core->link().fit().b / rig.b - 1.0) < 0.05);
}

TEST_CASE("a probe that is never acked gives no sample and does not stall the queue") {
  Rig rig(0, 2, kWide);
  rig.welcome();
  auto out = rig.roundStart(0);
  REQUIRE(out.size() == 2);
  REQUIRE(isProbe(out[0]));
  // The probe is lost; the push behind it arrives and is acked. Answers come in order, so the
  // probe is given up: neither it nor the push (which waited behind it for an unknown time)
  // becomes a sample.
  rig.send({out[0]}, false);
  rig.send({out[1]});
  rig.deliverAcks();
  rig.unacked = 0;
  CHECK(rig.core->link().samples() == 0);

  // The next round sends the next probe of the train.
  out = rig.roundStart(1);
  REQUIRE(out.size() == 2);
  CHECK(isProbe(out[0]));
  CHECK(onWire(out[0]) == 4 * kPacket);
  rig.send(out);
  rig.deliverAcks();
  // This probe; the push went out behind it (its time from the probe's ack would be its bytes
  // without the path's latency) and is not timed.
  CHECK(rig.core->link().samples() == 1);

  // A probe and a push both lost: nothing answers, so the queue waits for the ack timeout
  // (the coordinator patience), then moves on.
  out = rig.roundStart(2);
  REQUIRE(out.size() == 2);
  rig.send(out, false);
  rig.now += 1.0;
  out = rig.roundStart(3);
  CHECK(std::none_of(out.begin(), out.end(), isProbe));
  rig.send(out, false);
  rig.now += rig.settings.coordinator_patience_seconds + 0.5;
  rig.unacked = 0;
  out = rig.roundStart(4);
  REQUIRE(out.size() == 2);
  CHECK(isProbe(out[0]));
  CHECK(rig.core->link().samples() == 1);  // nothing from the lost ones
}

TEST_CASE("link.alternate_rounds pauses timing and probes on every other block of rounds") {
  constexpr uint32_t kBlock = 10;
  Rig rig(kBlock, 2, kWide);
  rig.welcome();
  // Rounds [0, 10) measure (and start the calibration train), [10, 20) do not, and so on.
  for (uint64_t block = 0; block < 8; ++block) {
    const bool paused = block % 2 == 1;
    const uint64_t samples_before = rig.core->link().samples();
    const size_t probes_before = rig.probes_sent.size();
    for (uint64_t r = block * kBlock; r < (block + 1) * kBlock; ++r) rig.round(r);
    const uint64_t samples = rig.core->link().samples() - samples_before;
    const size_t probes = rig.probes_sent.size() - probes_before;
    CAPTURE(block);
    if (paused) {
      CHECK(samples == 0);
      // No exploration probe is queued while paused: at most one queued on the last ack of
      // the block before goes out (untimed). The join-time train is over by then.
      CHECK(probes <= 1);
    } else {
      CHECK(samples >= kBlock);  // every push of the block, and its probes
    }
  }
  CHECK(rig.probes_sent_while_unacked == 0);
  CHECK(rig.probes_sent_behind_push == 0);
  // Paused blocks leave the fit as good as a plain run's.
  CHECK(std::abs(rig.core->link().fit().b / rig.b - 1.0) < 0.05);
}

TEST_CASE("an ack whose hold is no time is refused and counted, and later sends are still timed") {
  for (double bad :
       {-1e6, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    Rig rig(0, 2, kWide);
    rig.welcome();
    for (uint64_t r = 0; r < 6; ++r) rig.round(r);
    const uint64_t before = rig.core->link().fit().samples;
    REQUIRE(before > 0);
    // Round 6's push is answered with the bad hold.
    rig.send(rig.roundStart(6));
    for (auto& f : rig.in_flight) {
      rig.now = std::max(rig.now, f.acked_at);
      --rig.unacked;
      rig.core->onMessage(rig.ackFor(f.msg, isPush(f.msg) ? bad : 0.0), 0);
    }
    rig.in_flight.clear();
    CHECK(rig.core->stats().rejected == 1);
    const uint64_t after_bad = rig.core->link().fit().samples;
    for (uint64_t r = 7; r < 13; ++r) rig.round(r);
    CHECK(rig.core->link().fit().samples >= after_bad + 6);  // every later push timed again
    CHECK(std::abs(rig.core->link().fit().b / rig.b - 1.0) < 0.05);
  }
}

TEST_CASE("a push refused as it arrives is timed as an acknowledged one would be") {
  struct Case {
    wire::Error::Code code;
    bool about_push;
    bool timed;
    int64_t session = 0;  // the refusal's session, relative to the worker's (0: not said)
  };
  // Late and unknown-session refusals leave as the push arrives; a bad payload's may wait for
  // the round's close (its work is not link time). An unknown session's from a coordinator of
  // another session: the push waited out its restart in a queue.
  for (const Case& c :
       {Case{wire::Error::BAD_ROUND, true, true}, Case{wire::Error::UNKNOWN_SESSION, true, true},
        Case{wire::Error::UNKNOWN_SESSION, true, true, 1},
        Case{wire::Error::UNKNOWN_SESSION, true, false, 2},
        Case{wire::Error::BAD_ROUND, false, false}, Case{wire::Error::BAD_PAYLOAD, true, false}}) {
    CAPTURE(int(c.code));
    CAPTURE(c.about_push);
    CAPTURE(c.session);
    Rig rig(0, 2, kWide);
    rig.welcome();
    // Past the calibration train, to a round whose push goes out alone (one behind a probe is
    // not timed, acked or refused).
    uint64_t r = 0;
    std::vector<Message> out;
    for (;; ++r) {
      REQUIRE(r < 40);
      out = rig.roundStart(r);
      if (out.size() == 1 && isPush(out[0])) break;
      rig.send(out);
      rig.deliverAcks();
    }
    rig.send(out);
    REQUIRE(rig.in_flight.size() == 1);
    const uint64_t before = rig.core->link().samples();
    // Refused where its ack would have come.
    rig.now = rig.in_flight[0].acked_at;
    Message refusal;
    refusal.envelope = makeEnvelope();
    auto* e = refusal.envelope.mutable_error();
    e->set_code(c.code);
    e->set_text("late");
    e->set_round(r);
    e->set_about_push(c.about_push);
    // 1: the worker's own session; 2: the next one (a restarted coordinator).
    if (c.session > 0) e->set_session(rig.session + uint64_t(c.session) - 1);
    rig.core->onMessage(refusal, 0);
    CHECK(rig.core->link().samples() == before + (c.timed ? 1 : 0));
  }
}

TEST_CASE("a re-join carries the link this worker has measured, a first join none") {
  Rig rig(0, 2, kWide);
  const auto first = rig.core->start();
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].envelope.has_join());
  CHECK_FALSE(first[0].envelope.join().has_link());
  rig.welcome();
  for (uint64_t r = 0; r < 12; ++r) rig.round(r);
  REQUIRE(rig.core->link().fit().valid);
  const auto out = rig.newSession();  // a restarted coordinator: the worker joins it
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].envelope.has_join());
  const auto& j = out[0].envelope.join();
  REQUIRE(j.has_link());
  CHECK(j.link().samples() == rig.core->link().samples());
  CHECK(j.link().b_seconds_per_packet() == doctest::Approx(rig.core->link().fit().b));
  // The rig's link: 4 ms a packet.
  CHECK(std::abs(j.link().b_seconds_per_packet() / rig.b - 1.0) < 0.05);
}
