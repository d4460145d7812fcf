// The worker's probe scheduling, driven with a fake clock over a modelled link: probes go out one
// at a time and never while a push or probe is unacknowledged, ride ahead of a push (never
// behind one), exploration is decided on a push's ack, and a send that is never acknowledged
// gives no sample. The link here is a FIFO pipe whose time per message is known, with sizes
// counted as ZMTP 3 puts them on the TCP stream (RFC 23: a flags octet and a 1- or 8-octet size).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "common/util/checksum.hpp"
#include "tests/unit/worker/driven_worker.hpp"

using namespace tern;

namespace {

constexpr uint32_t kPacket = 1448;

// On-wire size of a message, written out from the ZMTP 3 spec independently of the worker code.
size_t onWire(const Message& m) {
  auto frame = [](size_t n) { return n + 1 + (n <= 255 ? 1 : 8); };
  size_t n = frame(m.envelope.ByteSizeLong());
  if (!m.payload.empty()) n += frame(m.payload.size());
  return n;
}

size_t packets(size_t bytes) { return (bytes + kPacket - 1) / kPacket; }

bool isProbe(const Message& m) { return m.envelope.has_push() && m.envelope.push().probe(); }
bool isPush(const Message& m) { return m.envelope.has_push() && !m.envelope.push().probe(); }

// One worker, a coordinator played by the test, and a FIFO uplink: a message takes
// a + b * packets once the link is free; the ack comes back `latency` later.
struct Rig {
  double now = 0.0;
  double a = 0.002, b = 0.004, latency = 0.0002;
  config::WorkerSettings settings;
  std::shared_ptr<ml::Dataset> shard =
      std::make_shared<ml::Dataset>(ml::syntheticDense(60, 3, 2, 1));
  std::unique_ptr<testing::DrivenWorker> core;
  uint64_t session = 99;
  double link_free = 0.0;

  struct InFlight {
    Message msg;
    double acked_at;
  };
  std::vector<InFlight> in_flight;       // handed to the link, ack not yet delivered
  std::vector<Message> probes_sent;      // in order
  size_t unacked = 0;                    // pushes and probes sent and not yet acked
  size_t probes_sent_while_unacked = 0;  // must stay 0
  size_t probes_sent_behind_push = 0;    // probes later than a push in one batch: must stay 0

  uint32_t features = 3;
  uint64_t peer_max_bytes = 0;  // the welcome's max_message_bytes (0 = not said)
  std::string refused_because;  // the Leave's reason when the last welcome was refused
  // The welcome's heartbeat_seconds and worker_patience_seconds (0 = not said).
  double coordinator_heartbeat = 0.0, coordinator_patience = 0.0;
  double round_deadline = 0.0;  // the welcome's round_deadline_seconds (0 = not said)
  double deadline_left = 0.0;   // each round start's deadline_seconds_left (0 = not said)
  bool acks_leave = false;      // the welcome's acks_leave
  // false: a message holds the link for a + b * packets (the latency a is the link's too);
  // true: its bytes hold the link for b * packets and arrive a later, so a message behind
  // another arrives b * its packets after it (a real path's pipelining).
  bool pipelined = false;

  explicit Rig(uint32_t alternate_rounds = 0, int32_t shard_classes = 2, uint32_t features_ = 3,
               const std::function<void(config::WorkerSettings&)>& configure = {})
      : features(features_) {
    shard = std::make_shared<ml::Dataset>(ml::syntheticDense(60, features, shard_classes, 1));
    settings.link.alternate_rounds = alternate_rounds;
    settings.compressor.name = "identity";
    settings.coordinator_patience_seconds = 30.0;
    settings.link.packet_bytes = kPacket;
    if (configure) configure(settings);
    core = std::make_unique<testing::DrivenWorker>(settings, shard, [this] { return now; });
    core->start();
  }

  void welcome(uint32_t batch_size = 8, const std::string& kind = "softmax", uint32_t classes = 2,
               double threshold = 0.0) {
    ml::ModelSpec spec;
    spec.kind = kind;
    spec.features = features;
    spec.classes = classes;
    spec.hidden = 8;  // mlp only
    auto model = ml::makeModel(spec);
    Message m;
    m.envelope = makeEnvelope();
    auto* w = m.envelope.mutable_welcome();
    w->set_worker_id(1);
    w->set_session(session);
    w->mutable_model()->set_kind(kind);
    w->mutable_model()->set_features(features);
    w->mutable_model()->set_classes(classes);
    if (kind == "mlp") w->mutable_model()->set_hidden(spec.hidden);
    w->mutable_training()->set_batch_size(batch_size);
    w->mutable_training()->set_seed(3);
    w->set_cap(uint32_t(model->numParams()));
    w->set_threshold(threshold);
    w->set_round(0);
    w->set_max_message_bytes(peer_max_bytes);
    w->set_heartbeat_seconds(coordinator_heartbeat);
    w->set_worker_patience_seconds(coordinator_patience);
    w->set_round_deadline_seconds(round_deadline);
    w->set_acks_leave(acks_leave);
    m.payload = floatsToBytes(std::vector<float>(model->numParams(), 0.0f));
    // No probe at the welcome: the train waits for the first push to ride ahead of. A refused
    // welcome is answered with a leave that says why, so the coordinator does not wait for it.
    auto out = core->onMessage(m, 0);
    if (core->joined()) {
      CHECK(out.empty());
    } else {
      REQUIRE(out.size() == 1);
      CHECK(out[0].envelope.has_leave());
      CHECK(out[0].envelope.leave().session() == session);
      CHECK(out[0].envelope.leave().reason().rfind("cannot train: ", 0) == 0);
      refused_because = out[0].envelope.leave().reason();
    }
  }

  // The round starts with the full model, so the test need not encode updates.
  std::vector<Message> roundStart(uint64_t round, double threshold = 0.0,
                                  double learning_rate = 0.0) {
    Message m;
    m.envelope = makeEnvelope();
    auto* rs = m.envelope.mutable_round_start();
    rs->set_round(round);
    rs->set_session(session);
    rs->set_threshold(threshold);
    rs->set_learning_rate(learning_rate);
    rs->set_deadline_seconds_left(deadline_left);
    rs->set_full_model(true);
    rs->set_cap(uint32_t(core->parameters().size()));
    m.payload = floatsToBytes(core->parameters());
    return core->onMessage(m, 0);
  }

  // Hands the core's output to the link in order; `deliver` false loses it on the way.
  void send(const std::vector<Message>& out, bool deliver = true) {
    bool push_seen = false;
    for (const auto& m : out) {
      if (isProbe(m)) {
        probes_sent.push_back(m);
        if (unacked > 0) ++probes_sent_while_unacked;
        if (push_seen) ++probes_sent_behind_push;
      }
      if (isPush(m)) push_seen = true;
      core->onSent(m, m.envelope.ByteSizeLong() + m.payload.size());
      if (!m.envelope.has_push()) continue;
      ++unacked;
      const double start = std::max(now, link_free);
      if (pipelined) {
        link_free = start + b * double(packets(onWire(m)));
        if (deliver) in_flight.push_back({m, link_free + a + latency});
      } else {
        link_free = start + a + b * double(packets(onWire(m)));
        if (deliver) in_flight.push_back({m, link_free + latency});
      }
    }
  }

  Message ackFor(const Message& m, double hold = 0.0) {
    Message answer;
    answer.envelope = makeEnvelope();
    auto* ack = answer.envelope.mutable_ack();
    ack->set_round(m.envelope.push().round());
    ack->set_probe(m.envelope.push().probe());
    ack->set_probe_id(m.envelope.push().probe_id());
    ack->set_hold_seconds(hold);
    return answer;
  }

  // Delivers every ack in flight, in time order; returns the messages the acks produced.
  std::vector<Message> deliverAcks() {
    std::vector<Message> produced;
    std::sort(in_flight.begin(), in_flight.end(),
              [](const auto& x, const auto& y) { return x.acked_at < y.acked_at; });
    for (auto& f : in_flight) {
      now = std::max(now, f.acked_at);
      --unacked;
      auto out = core->onMessage(ackFor(f.msg), 0);
      produced.insert(produced.end(), out.begin(), out.end());
    }
    in_flight.clear();
    return produced;
  }

  // A heartbeat from a coordinator restarted under a new session.
  std::vector<Message> newSession() {
    ++session;
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_heartbeat()->set_session(session);
    return core->onMessage(m, 0);
  }

  // A whole round: start, send, all acks back.
  void round(uint64_t r) {
    send(roundStart(r));
    CHECK(deliverAcks().empty());  // an ack never sends anything by itself
  }
};

}  // namespace

TEST_CASE("the calibration train goes one probe ahead of each push, never behind or unacked") {
  Rig rig;
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

TEST_CASE("a push sent behind a probe does not pull the fitted latency towards zero") {
  // A 10 ms path at 11.6 ms a packet: a push that waits behind the probe ahead of it arrives
  // b * its packets after the probe, without a second latency. Timed from the probe's ack it
  // was a sample of b x alone; after the calibration train the fit's a came out near 1 ms.
  Rig rig;
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
  Rig rig;
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
  Rig early;
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
  Rig rig;
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

TEST_CASE("a push is held to what the fitted link carries within the round's deadline") {
  // d = 6002, top-k at the cap: a whole push is 17 packets, 0.07 s on a link of 2 ms + 4 ms a
  // packet, against a round deadline of 0.05 s; the gradient takes 4 ms at each of the core's
  // stop checks. Pushed at the cap it missed its round every round.
  auto rig = [](const std::string& compressor, double deadline) {
    auto r = std::make_unique<Rig>(
        0, 2, 3000, [&](config::WorkerSettings& s) { s.compressor.name = compressor; });
    r->round_deadline = deadline;
    r->welcome();
    REQUIRE(r->core->joined());
    Rig* raw = r.get();
    r->core->setStopCheck([raw] {
      raw->now += 0.004;
      return false;
    });
    return r;
  };
  // One round started on an idle link: the level pushed, and when the push (behind the probe
  // ahead of it, if any) arrived, on the link the test models, after the round start.
  auto round = [](Rig& r, uint64_t n) {
    r.now = std::max(r.now, r.link_free) + 0.01;
    const double started = r.now;
    const auto out = r.roundStart(n);
    r.send(out);
    r.deliverAcks();
    const auto push = std::find_if(out.begin(), out.end(), isPush);
    REQUIRE(push != out.end());
    return std::pair{push->envelope.push().level(), r.link_free - started};
  };
  const uint32_t d = 6002;
  const double deadline = 0.05;
  auto slow = rig("topk", deadline);
  // Until the fit is made nothing is known of the link: pushes go at the cap.
  for (uint64_t n = 0; n < 12; ++n) {
    const bool fitted = slow->core->link().fit().valid;
    const auto [level, arrived] = round(*slow, n);
    if (!fitted) CHECK(level == d);
  }
  REQUIRE(slow->core->link().fit().valid);
  const uint64_t trimmed_before = slow->core->stats().deadline_trimmed;
  for (uint64_t n = 12; n < 20; ++n) {
    CAPTURE(n);
    const auto [level, arrived] = round(*slow, n);
    CHECK(level < d);
    // It arrives within the deadline, and not far within it: the level is the most that arrives
    // in time, not a guess.
    CHECK(arrived <= deadline);
    CHECK(arrived >= deadline / 2);
  }
  CHECK(slow->core->stats().deadline_trimmed - trimmed_before == 8);
  CHECK(slow->core->stats().trimmed == 0);
  // A round start that says less is left (a worker admitted into a running round): the push is
  // held to that.
  slow->deadline_left = deadline / 2;
  for (uint64_t n = 20; n < 24; ++n) CHECK(round(*slow, n).second <= deadline / 2);
  // Where nothing was cut, nothing is counted: a deadline that a push at the cap meets.
  slow->deadline_left = 1.0;
  const uint64_t cut = slow->core->stats().deadline_trimmed;
  for (uint64_t n = 24; n < 28; ++n) CHECK(round(*slow, n).first == d);
  CHECK(slow->core->stats().deadline_trimmed == cut);
  // The hard threshold (here 0: every coordinate passes) keeps its largest coordinates that
  // arrive in time; the cut is the deadline's, not the coordinator's message limit's.
  auto threshold = rig("threshold", deadline);
  for (uint64_t n = 0; n < 20; ++n) {
    const auto [level, arrived] = round(*threshold, n);
    if (n >= 12) CHECK(arrived <= deadline);
  }
  REQUIRE(threshold->core->link().fit().valid);
  CHECK(threshold->core->stats().deadline_trimmed > 0);
  CHECK(threshold->core->stats().trimmed == 0);
  // No deadline said (an older coordinator): the push goes at the cap, as before.
  auto unsaid = rig("topk", 0.0);
  for (uint64_t n = 0; n < 16; ++n) CHECK(round(*unsaid, n).first == d);
  CHECK(unsaid->core->stats().deadline_trimmed == 0);
  CHECK(unsaid->core->stats().deadline_late == 0);
  // A compressor without a level cannot send less: it goes whole, and late, counted (and said).
  auto dense = rig("identity", deadline);
  for (uint64_t n = 0; n < 16; ++n) CHECK(round(*dense, n).second > deadline);
  REQUIRE(dense->core->link().fit().valid);
  CHECK(dense->core->stats().deadline_late > 0);
  CHECK(dense->core->stats().deadline_trimmed == 0);
}

TEST_CASE("exploration probes are decided on a push's ack and go out ahead of the next push") {
  Rig rig;
  rig.welcome();
  for (uint64_t r = 0; r < 80; ++r) rig.round(r);
  // 8 calibration probes, then pushes all of one size (one packet) call for exploration.
  REQUIRE(rig.probes_sent.size() > 8);
  CHECK(rig.probes_sent_while_unacked == 0);
  CHECK(rig.probes_sent_behind_push == 0);
  for (size_t i = 8; i < rig.probes_sent.size(); ++i) {
    // A clearly different size from the one-packet pushes.
    CHECK(packets(onWire(rig.probes_sent[i])) >= 4);
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
  Rig rig;
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
  Rig rig(kBlock);
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

TEST_CASE("a welcome with batch size 0 is refused and counted, and the worker stays unjoined") {
  Rig rig;
  rig.welcome(0);
  CHECK_FALSE(rig.core->joined());
  CHECK(rig.core->stats().rejected == 1);
  rig.welcome(8);
  CHECK(rig.core->joined());
}

TEST_CASE("a worker whose shard has a label the model has no output for asks again later") {
  // The coordinator's configuration (classes) or this worker's data is wrong; either may be
  // mended, and a fleet must not stay down for a typo at the coordinator. Every ask costs a
  // welcome of the whole model: after 30 s, then 60, 120, ... up to 600 s.
  for (const auto& [kind, classes] : {std::pair<std::string, uint32_t>{"logistic", 2},
                                      std::pair<std::string, uint32_t>{"softmax", 2}}) {
    CAPTURE(kind);
    Rig rig(0, 3);  // labels 0, 1, 2
    double t = 0.0;
    for (const double wait : {30.0, 60.0, 120.0, 240.0, 480.0, 600.0, 600.0}) {
      CAPTURE(wait);
      rig.now = t;
      rig.welcome(8, kind, classes);
      CHECK_FALSE(rig.core->joined());
      CHECK_FALSE(rig.core->finished());
      CHECK(rig.core->fatalError().empty());
      CHECK(rig.refused_because.find("label 2 has no output") != std::string::npos);
      CHECK(rig.core->nextWakeup() == doctest::Approx(t + wait));
      rig.now = t + wait - 0.01;  // past its 30 s patience, but a refused join waits its turn
      CHECK(rig.core->onTick().empty());
      rig.now = t + wait;
      const auto ask = rig.core->onTick();
      REQUIRE(ask.size() == 1);
      CHECK(ask[0].envelope.has_join());
      t += wait;
    }
    CHECK(rig.core->stats().rejected == 7);
    // A new connection (a restarted coordinator, perhaps mended) is asked at once, not in 600 s.
    rig.welcome(8, kind, classes);
    CHECK(rig.core->nextWakeup() == doctest::Approx(t + 600.0));
    rig.core->connectionUp();
    CHECK(rig.core->nextWakeup() ==
          doctest::Approx(t));  // within a second: this one's instance is 0
    const auto asked = rig.core->onTick();
    REQUIRE(asked.size() == 1);
    CHECK(asked[0].envelope.has_join());
    // The coordinator's model mended: the next welcome fits and the worker trains.
    rig.welcome(8, "softmax", 3);
    CHECK(rig.core->joined());
    CHECK(rig.core->fatalError().empty());
  }
}

TEST_CASE("a threshold no compressor can use is refused and counted, at the welcome and later") {
  Rig rig(0, 2, 3, [](config::WorkerSettings& s) { s.compressor.name = "threshold"; });
  rig.welcome(8, "softmax", 2, std::numeric_limits<double>::infinity());
  CHECK_FALSE(rig.core->joined());
  CHECK_FALSE(rig.core->finished());  // a coordinator may send a usable one next time
  CHECK(rig.core->stats().rejected == 1);
  rig.welcome(8, "softmax", 2, 0.01);
  REQUIRE(rig.core->joined());
  // A round start with an infinite threshold: refused, and the push goes out under the old one.
  const auto out = rig.roundStart(0, std::numeric_limits<double>::infinity());
  CHECK(rig.core->stats().rejected == 2);
  CHECK(std::count_if(out.begin(), out.end(), isPush) == 1);
}

TEST_CASE("a shard whose smoothness bound is not finite is refused at the welcome, saying why") {
  Rig rig;
  rig.shard->dense(0, 0) = std::numeric_limits<float>::infinity();
  rig.welcome();
  CHECK_FALSE(rig.core->joined());
  CHECK(rig.core->stats().rejected == 1);
  CHECK(rig.core->finished());
  CHECK(rig.core->fatalError().find("smoothness") != std::string::npos);
}

TEST_CASE("an ack whose hold is no time is refused and counted, and later sends are still timed") {
  for (double bad :
       {-1e6, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    Rig rig;
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

namespace {

// A worker with top-k, error feedback and cat under the payload model, after its first push for
// a round start carrying `learning_rate`: the push, the vector cat chose from (the residual plus
// what was sent), the shard's smoothness and the cost per level as priced.
struct FirstCatPush {
  std::unique_ptr<Rig> rig;
  Message push;
  std::vector<double> v;
  double L = 0.0;
  std::vector<double> cost;  // by level, the push's price
  double overhead = 0.0;     // bytes priced besides the codec's
  size_t sent = 0;           // coordinates the payload carries
};

FirstCatPush firstCatPush(double learning_rate,
                          config::StepRule step = config::StepRule::kCoordinator) {
  FirstCatPush r;
  r.rig = std::make_unique<Rig>(0, 2, 40, [&](config::WorkerSettings& s) {
    s.compressor.name = "topk";
    s.error_feedback = true;
    s.error_feedback_auto = false;
    s.tuning.method = tern::tuning::TunerKind::kCat;
    s.tuning.cost_model = tern::costmodel::CostModelKind::kPayload;
    s.tuning.step = step;
    s.link.measure = false;
  });
  r.rig->welcome(16);
  REQUIRE(r.rig->core->joined());
  const auto out = r.rig->roundStart(0, 0.0, learning_rate);
  const auto push = std::find_if(out.begin(), out.end(), isPush);
  REQUIRE(push != out.end());
  r.push = *push;
  const auto d = uint32_t(r.rig->core->parameters().size());
  compression::DecodeLimits limits;
  limits.expected_dim = d;
  const auto sent = compression::decode(r.push.payload, limits);
  REQUIRE(sent.value);
  r.sent = sent.value->indices.size();
  r.v.assign(r.rig->core->residual().begin(), r.rig->core->residual().end());
  std::vector<float> dense(d, 0.0f);
  compression::addScaled(*sent.value, 1.0f, dense);
  for (uint32_t j = 0; j < d; ++j) r.v[j] += dense[j];
  ml::ModelSpec spec;
  spec.kind = "softmax";
  spec.features = 40;
  spec.classes = 2;
  r.L = ml::makeModel(spec)->smoothness(*r.rig->shard).value_or(1.0);
  auto topk = compression::makeCompressor(compression::CompressorSpec{});
  const auto& p = r.push.envelope.push();
  r.overhead = p.predicted_cost() / 8.0 - double(topk->encodedBytes(d, p.level()));
  r.cost.assign(d + 1, 0.0);
  for (uint32_t T = 1; T <= d; ++T)
    r.cost[T] = 8.0 * (double(topk->encodedBytes(d, T)) + r.overhead);
  return r;
}

// S2(T) of v, by T.
std::vector<double> topSquares(const std::vector<double>& v) {
  std::vector<double> sq;
  for (double x : v) sq.push_back(x * x);
  std::sort(sq.begin(), sq.end(), std::greater<>());
  std::vector<double> s2(v.size() + 1, 0.0);
  for (size_t T = 1; T <= v.size(); ++T) s2[T] = s2[T - 1] + sq[T - 1];
  return s2;
}

}  // namespace

TEST_CASE("a worker with cat sends the level a scan of every level picks, and reports it") {
  // Top-k with error feedback under the payload model: after the first push the residual holds
  // everything the push left out, so the vector cat chose from is residual + what was sent.
  FirstCatPush r = firstCatPush(0.0);
  const auto d = uint32_t(r.v.size());
  const std::vector<double> s2 = topSquares(r.v);
  const auto& p = r.push.envelope.push();
  REQUIRE(p.level() >= 1);
  REQUIRE(p.level() <= d);
  CHECK(r.sent == p.level());
  // The price is the push's bits on the wire: the codec's bytes and what the push carries
  // besides (its envelope and the two ZMTP frame headers, 2 bytes up to 255 and 9 above). The
  // tuner prices the envelope before the report fields hold their final values and the payload
  // with a long frame header, so it may count up to 2 + 7 bytes more, never less.
  const auto frame = [](size_t n) { return n <= 255 ? 2.0 : 9.0; };
  const double wire_overhead = double(r.push.envelope.ByteSizeLong()) +
                               frame(r.push.envelope.ByteSizeLong()) + frame(r.push.payload.size());
  CHECK(r.overhead >= wire_overhead);
  CHECK(r.overhead <= wire_overhead + 9.0);
  double best = -1.0;
  for (uint32_t T = 1; T <= d; ++T) best = std::max(best, s2[T] / (2.0 * r.L) / r.cost[T]);
  CHECK(s2[p.level()] / (2.0 * r.L) / r.cost[p.level()] >= best * (1.0 - 1e-12));
  CHECK(p.predicted_improvement() == doctest::Approx(s2[p.level()] / (2.0 * r.L)).epsilon(1e-9));
  CHECK(p.level() < d);  // the scan's best here is a real choice, not everything
}

TEST_CASE("under the packet model a push takes no more packets on the wire than cat priced") {
  // 64-byte packets and a per-packet price well above the fixed one: cat fills the packets it
  // pays for. The envelope and frame headers ride in them too, so a level chosen by the codec's
  // bytes alone would spill into one more packet than it was priced at.
  constexpr double c_fixed = 0.001, c_packet = 0.01;
  constexpr size_t packet = 64;
  Rig rig(0, 2, 40, [&](config::WorkerSettings& s) {
    s.compressor.name = "topk";
    s.error_feedback = true;
    s.error_feedback_auto = false;
    s.tuning.method = tern::tuning::TunerKind::kCat;
    s.tuning.cost_model = tern::costmodel::CostModelKind::kPacket;
    s.tuning.c_fixed = c_fixed;
    s.tuning.c_packet = c_packet;
    s.link.packet_bytes = uint32_t(packet);
    s.link.measure = false;
  });
  rig.welcome(16);
  REQUIRE(rig.core->joined());
  const auto frame = [](size_t n) { return n <= 255 ? size_t{2} : size_t{9}; };
  size_t pushes = 0;
  for (uint64_t r = 0; r < 12; ++r) {
    const auto out = rig.roundStart(r);
    const auto push = std::find_if(out.begin(), out.end(), isPush);
    REQUIRE(push != out.end());
    const auto& p = push->envelope.push();
    const size_t env = push->envelope.ByteSizeLong();
    const size_t wire = env + frame(env) + push->payload.size() + frame(push->payload.size());
    const size_t wire_packets = (wire + packet - 1) / packet;
    const double priced_packets = (p.predicted_cost() - c_fixed) / c_packet;
    CAPTURE(r);
    CAPTURE(p.level());
    CAPTURE(wire);
    CHECK(double(wire_packets) <= priced_packets + 1e-9);
    CHECK(double(wire_packets) >= priced_packets - 1.0 - 1e-9);
    ++pushes;
  }
  CHECK(pushes == 12);
}

TEST_CASE("a round whose gradient overflows sends a push that says so, and leaves the residual") {
  Rig rig(0, 2, 3, [](config::WorkerSettings& s) {
    s.compressor.name = "topk";
    s.error_feedback = true;
    s.error_feedback_auto = false;
    s.link.measure = false;
  });
  rig.welcome();
  REQUIRE(rig.core->joined());
  const std::vector<float> good = rig.core->parameters();
  auto roundWith = [&](uint64_t round, const std::vector<float>& params) {
    Message m;
    m.envelope = makeEnvelope();
    auto* rs = m.envelope.mutable_round_start();
    rs->set_round(round);
    rs->set_session(rig.session);
    rs->set_full_model(true);
    rs->set_cap(1);  // top-1: the residual keeps the rest
    m.payload = floatsToBytes(params);
    return rig.core->onMessage(m, 0);
  };
  const auto first = roundWith(0, good);
  REQUIRE(std::count_if(first.begin(), first.end(), isPush) == 1);
  const std::vector<float> residual = rig.core->residual();
  REQUIRE(residual.size() == good.size());
  REQUIRE(std::any_of(residual.begin(), residual.end(), [](float e) { return e != 0.0f; }));
  const uint64_t rounds = rig.core->stats().rounds;
  // A model whose logits overflow a float: loss and gradient are not finite.
  const auto out = roundWith(1, std::vector<float>(good.size(), 3e38f));
  REQUIRE(out.size() == 1);  // no probe ahead of it
  REQUIRE(isPush(out[0]));
  CHECK(std::isnan(out[0].envelope.push().local_loss()));
  CHECK(out[0].payload.empty());
  CHECK(rig.core->stats().non_finite_gradients == 1);
  CHECK(rig.core->stats().rounds == rounds);
  CHECK(rig.core->residual() == residual);
  // The next round's model is finite again: an ordinary push.
  const auto next = roundWith(2, good);
  const auto push = std::find_if(next.begin(), next.end(), isPush);
  REQUIRE(push != next.end());
  CHECK(std::isfinite(push->envelope.push().local_loss()));
  CHECK_FALSE(push->payload.empty());
  CHECK(rig.core->stats().rounds == rounds + 1);
}

namespace {

// A welcome of a softmax model on the rig's 3 features (4 parameters per class) with the given
// classes, payload size (in floats) and local steps.
Message softmaxWelcome(uint64_t session, uint32_t classes, size_t payload_floats,
                       uint32_t local_steps, double local_lr) {
  Message m;
  m.envelope = makeEnvelope();
  auto* w = m.envelope.mutable_welcome();
  w->set_worker_id(1);
  w->set_session(session);
  w->mutable_model()->set_kind("softmax");
  w->mutable_model()->set_features(3);
  w->mutable_model()->set_classes(classes);
  w->mutable_training()->set_batch_size(8);
  w->mutable_training()->set_local_steps(local_steps);
  w->mutable_training()->set_local_lr(local_lr);
  w->set_cap(8);
  m.payload = floatsToBytes(std::vector<float>(payload_floats, 0.0f));
  return m;
}

}  // namespace

TEST_CASE("a welcome with local steps and no usable local_lr is refused and counted") {
  for (double lr : {0.0, -0.1, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(lr);
    Rig rig;
    rig.core->onMessage(softmaxWelcome(rig.session, 2, 8, 4, lr), 0);
    CHECK_FALSE(rig.core->joined());
    CHECK(rig.core->stats().rejected == 1);
  }
}

TEST_CASE(
    "a welcome with a model beyond the limits, a payload of the wrong size or too many "
    "local steps is refused and counted, and the worker stays up") {
  struct Case {
    std::string name;
    uint32_t classes;
    size_t payload_floats;
    uint32_t local_steps;
  };
  for (const Case& c : {Case{"classes beyond the limit", 4000000000u, 8, 1},
                        Case{"classes within it, payload of another model", 60000, 8, 1},
                        Case{"payload one float short", 2, 7, 1},
                        Case{"too many local steps", 2, 8, config::kMaxLocalSteps + 1}}) {
    CAPTURE(c.name);
    Rig rig;
    std::vector<Message> out;
    CHECK_NOTHROW(
        out = rig.core->onMessage(
            softmaxWelcome(rig.session, c.classes, c.payload_floats, c.local_steps, 0.1), 0));
    CHECK_FALSE(rig.core->joined());
    CHECK(rig.core->stats().rejected == 1);
    REQUIRE(out.size() == 1);
    CHECK(out[0].envelope.has_leave());
  }
  // The same welcome with a usable model, payload and local steps is taken.
  Rig rig;
  rig.core->onMessage(softmaxWelcome(rig.session, 2, 8, 4, 0.1), 0);
  CHECK(rig.core->joined());
}

TEST_CASE("a worker stops, saying why, when no re-join can help") {
  auto errorIn = [](uint32_t version, wire::Error::Code code) {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.set_version(version);
    m.envelope.mutable_error()->set_code(code);
    m.envelope.mutable_error()->set_text("refused");
    return m;
  };
  SUBCASE("the coordinator speaks another protocol version") {
    Rig rig;
    CHECK(rig.core->onMessage(errorIn(wire::PROTOCOL_VERSION + 1, wire::Error::BAD_VERSION), 0)
              .empty());
    CHECK(rig.core->finished());
    CHECK(rig.core->fatalError().find("protocol version " +
                                      std::to_string(wire::PROTOCOL_VERSION + 1)) !=
          std::string::npos);
  }
  SUBCASE("another version's other messages are refused, not obeyed") {
    Rig rig;
    rig.core->onMessage(errorIn(wire::PROTOCOL_VERSION + 1, wire::Error::SHUTTING_DOWN), 0);
    CHECK_FALSE(rig.core->finished());
    CHECK(rig.core->stats().rejected == 1);
  }
  SUBCASE("the model does not fit the worker's max_message_bytes") {
    Rig rig;
    rig.core->onMessage(errorIn(wire::PROTOCOL_VERSION, wire::Error::MESSAGE_LIMIT), 0);
    CHECK(rig.core->finished());
    CHECK(rig.core->fatalError() == "the coordinator refused this worker: refused");
  }
}

TEST_CASE(
    "a round start's learning rate is the step the worker's cat prices its levels at, and the "
    "least harm past 2/L") {
  const double L = firstCatPush(0.0).L;
  for (const double scaled : {0.3, 1.0, 1.5, 2.5}) {
    const double eta = scaled / L;
    CAPTURE(scaled);
    FirstCatPush r = firstCatPush(eta);
    const auto& p = r.push.envelope.push();
    const std::vector<double> s2 = topSquares(r.v);
    const double factor = eta * (1.0 - L * eta / 2.0);
    const size_t d = r.v.size();
    // Closed form: the best ratio among levels that earn a decrease, else the least harm (the
    // smallest S2: one coordinate).
    CHECK(r.rig->core->stats().rejected == 0);
    REQUIRE(p.level() >= 1);
    REQUIRE(p.level() <= d);
    if (factor > 0.0) {
      double best = -1.0;
      for (uint32_t T = 1; T <= d; ++T) best = std::max(best, factor * s2[T] / r.cost[T]);
      CHECK(factor * s2[p.level()] / r.cost[p.level()] >= best * (1.0 - 1e-12));
      CHECK(p.level() > 1);
    } else {
      CHECK(p.level() == 1);
    }
    CHECK(r.rig->core->stats().last_step == eta);
    CHECK(p.predicted_step() == eta);
    CHECK(p.predicted_improvement() ==
          doctest::Approx(factor * s2[p.level()]).epsilon(1e-9).scale(1e-12));
    if (scaled > 2.0) CHECK(p.predicted_improvement() < 0.0);
  }
}

TEST_CASE("a bad learning rate in a round start is refused and the paper's step kept") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const double bad : {nan, -0.5, inf}) {
    CAPTURE(bad);
    FirstCatPush r = firstCatPush(bad);
    const auto& p = r.push.envelope.push();
    const std::vector<double> s2 = topSquares(r.v);
    CHECK(r.rig->core->stats().rejected == 1);
    CHECK(r.rig->core->stats().last_step == doctest::Approx(1.0 / r.L).epsilon(1e-12));
    CHECK(p.predicted_improvement() == doctest::Approx(s2[p.level()] / (2.0 * r.L)).epsilon(1e-9));
  }
  // Not said (0) is no error: the paper's step, nothing refused.
  FirstCatPush none = firstCatPush(0.0);
  CHECK(none.rig->core->stats().rejected == 0);
  CHECK(none.rig->core->stats().last_step == doctest::Approx(1.0 / none.L).epsilon(1e-12));
}

TEST_CASE("with tuning.step paper the worker's cat ignores the coordinator's learning rate") {
  const double L = firstCatPush(0.0).L;
  FirstCatPush r = firstCatPush(2.5 / L, config::StepRule::kPaper);
  const auto& p = r.push.envelope.push();
  const std::vector<double> s2 = topSquares(r.v);
  CHECK(r.rig->core->stats().rejected == 0);
  CHECK(r.rig->core->stats().last_step == doctest::Approx(1.0 / L).epsilon(1e-12));
  CHECK(p.predicted_improvement() == doctest::Approx(s2[p.level()] / (2.0 * L)).epsilon(1e-9));
  CHECK(p.level() > 1);
}

TEST_CASE("by default the worker's cat takes the coordinator's step only where L guarantees it") {
  const double L = firstCatPush(0.0).L;
  // lr L < 2: the bound at the coordinator's step is informative, and it is the step priced.
  FirstCatPush below = firstCatPush(0.3 / L, config::StepRule::kAuto);
  CHECK(below.rig->core->stats().last_step == doctest::Approx(0.3 / L).epsilon(1e-12));
  // lr L >= 2: the bound guarantees no decrease at any level; the paper's step stands in.
  FirstCatPush past = firstCatPush(2.5 / L, config::StepRule::kAuto);
  const auto& p = past.push.envelope.push();
  const std::vector<double> s2 = topSquares(past.v);
  CHECK(past.rig->core->stats().rejected == 0);
  CHECK(past.rig->core->stats().last_step == doctest::Approx(1.0 / L).epsilon(1e-12));
  CHECK(p.predicted_improvement() == doctest::Approx(s2[p.level()] / (2.0 * L)).epsilon(1e-9));
  CHECK(p.level() > 1);
}

TEST_CASE("a model without a smoothness bound keeps the paper's step by default") {
  // The MLP gives no bound (L = 1 stands in): auto cannot tell whether the coordinator's step
  // is safe, so the tuner prices at the stand-in's paper step, whatever the learning rate.
  for (const auto step : {config::StepRule::kAuto, config::StepRule::kCoordinator}) {
    CAPTURE(config::stepRuleName(step));
    Rig rig(0, 2, 40, [&](config::WorkerSettings& s) {
      s.compressor.name = "topk";
      s.tuning.method = tern::tuning::TunerKind::kCat;
      s.tuning.cost_model = tern::costmodel::CostModelKind::kPayload;
      s.tuning.step = step;
      s.link.measure = false;
    });
    rig.welcome(16, "mlp");
    REQUIRE(rig.core->joined());
    const auto out = rig.roundStart(0, 0.0, 0.01);
    const auto push = std::find_if(out.begin(), out.end(), isPush);
    REQUIRE(push != out.end());
    CHECK(push->envelope.push().predicted_step() == (step == config::StepRule::kAuto ? 1.0 : 0.01));
  }
}

TEST_CASE("pushes and probes fit in the coordinator's largest message, said in its welcome") {
  // d = 6002 and a coordinator taking parts of at most 4096 bytes; probes sized for 64 kB
  // packets. Before, the welcome did not say, and a push or probe over the coordinator's limit
  // cost the worker its connection, again every round.
  auto rig = [](const std::string& compressor, uint64_t peer_max) {
    auto r = std::make_unique<Rig>(0, 2, 3000, [&](config::WorkerSettings& s) {
      s.compressor.name = compressor;
      s.link.packet_bytes = 65536;
    });
    r->peer_max_bytes = peer_max;
    r->welcome();
    return r;
  };
  for (const std::string name : {"topk", "stochastic", "sq"}) {
    CAPTURE(name);
    auto r = rig(name, 4096);
    REQUIRE(r->core->joined());
    for (uint64_t round = 0; round < 6; ++round) {
      const auto out = r->roundStart(round);
      for (const auto& m : out) {
        CHECK(m.payload.size() <= 4096);
        // S+Q's signs of all 6002 coordinates fit (about 750 bytes); the others' values do not.
        if (isPush(m) && name != "sq") CHECK(m.envelope.push().level() < 6002);
      }
      r->send(out);
      r->deliverAcks();
    }
    CHECK(r->probes_sent.size() >= 4);
  }
  // Without the limit said, the push is the whole model at top-k's cap, and probes are as sized.
  auto unlimited = rig("topk", 0);
  const auto out = unlimited->roundStart(0);
  bool big = false;
  for (const auto& m : out) big = big || m.payload.size() > 4096;
  CHECK(big);
  // A compressor that sends every coordinate whatever the level cannot fit: the worker says why
  // and asks again later (the coordinator's limit may be raised).
  auto dense = rig("identity", 4096);
  CHECK_FALSE(dense->core->joined());
  CHECK_FALSE(dense->core->finished());
  CHECK(dense->refused_because.find("max_message_bytes of 4096") != std::string::npos);
  CHECK(dense->core->nextWakeup() == doctest::Approx(dense->now + 30.0));
  // A threshold push's size follows the data: at threshold 0 every coordinate passes, and the
  // push keeps its largest that fit, counted, the rest staying in the residual. Before, the
  // worker sent the whole model and lost its connection every round.
  auto threshold = rig("threshold", 4096);
  REQUIRE(threshold->core->joined());
  for (uint64_t round = 0; round < 3; ++round) {
    const auto pushed_now = threshold->roundStart(round);
    bool pushed = false;
    for (const auto& m : pushed_now) {
      CHECK(m.payload.size() <= 4096);
      if (!isPush(m)) continue;
      pushed = true;
      const auto decoded = compression::decode(m.payload, compression::DecodeLimits{});
      REQUIRE(decoded.value.has_value());
      const size_t sent = decoded.value->nonZeros();
      CHECK(sent > 500);  // about 4096 / 8 bytes a coordinate: the limit is used, not wasted
      // The rest is kept, and what went is the largest: nothing kept outweighs anything sent
      // (each round's vector is the gradient plus the residual, which the push splits).
      float smallest_sent = INFINITY, largest_kept = 0.0f;
      for (float x : decoded.value->values) smallest_sent = std::min(smallest_sent, std::fabs(x));
      size_t kept = 0;
      for (float x : threshold->core->residual()) {
        kept += x != 0.0f ? 1 : 0;
        largest_kept = std::max(largest_kept, std::fabs(x));
      }
      CHECK(kept > 0);
      CHECK(largest_kept <= smallest_sent);
    }
    CHECK(pushed);
    threshold->send(out);
    threshold->deliverAcks();
  }
  CHECK(threshold->core->stats().trimmed == 3);
  // Without a limit said, the same worker sends every coordinate that passes, and trims nothing.
  auto unlimited_threshold = rig("threshold", 0);
  REQUIRE(unlimited_threshold->core->joined());
  bool unlimited_pushed = false;
  for (const auto& m : unlimited_threshold->roundStart(0)) {
    if (!isPush(m)) continue;
    unlimited_pushed = true;
    const auto decoded = compression::decode(m.payload, compression::DecodeLimits{});
    REQUIRE(decoded.value.has_value());
    CHECK(decoded.value->nonZeros() > 4096 / 8);
    CHECK(m.payload.size() > 4096);
  }
  CHECK(unlimited_pushed);
  CHECK(unlimited_threshold->core->stats().trimmed == 0);
}

TEST_CASE("a limit just above the whole model's size caps top-k below the index section's cost") {
  // All 6002 values take 9 + 4 * 6002 bytes with no index section; 6001 take about 750 bytes
  // more. With the limit 200 bytes above the whole model, top-k at its cap of d fits, but a level
  // a little below d does not: the cap must fall below every such level. Before, the search took
  // the whole model's size for the levels near d and let pushes over the limit through.
  const uint32_t d = 6002;
  const auto topk = compression::makeCompressor({"topk"});
  const uint64_t limit = topk->encodedBytes(d, d) + 200;
  REQUIRE(topk->encodedBytes(d, d - 1) > limit);
  Rig r(0, 2, 3000, [](config::WorkerSettings& s) { s.compressor.name = "topk"; });
  r.peer_max_bytes = limit;
  r.welcome();
  REQUIRE(r.core->joined());
  for (uint64_t round = 0; round < 4; ++round) {
    const auto out = r.roundStart(round);
    for (const auto& m : out) {
      if (!isPush(m)) continue;
      CHECK(m.payload.size() <= limit);
      CHECK(m.envelope.push().level() < d);
      // The largest level that fits, by brute force over the codec's bound.
      uint32_t best = 0;
      for (uint32_t k = 1; k < d; ++k) {
        if (topk->encodedBytes(d, k) <= limit) best = k;
      }
      CHECK(m.envelope.push().level() == best);
    }
    r.send(out);
    r.deliverAcks();
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
    Rig rig;
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
  Rig rig;
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
