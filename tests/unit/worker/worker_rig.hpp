#pragma once
// One worker core on a fake clock, a coordinator played by the test, and a modelled uplink: a
// FIFO pipe whose time per message is known, with sizes counted as ZMTP 3 puts them on the TCP
// stream (RFC 23: a flags octet and a 1- or 8-octet size). Shared by the worker core's tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "tests/unit/worker/driven_worker.hpp"

namespace tern::testing {

inline constexpr uint32_t kPacket = 1448;

// On-wire size of a message, written out from the ZMTP 3 spec independently of the worker code.
inline size_t onWire(const Message& m) {
  auto frame = [](size_t n) { return n + 1 + (n <= 255 ? 1 : 8); };
  size_t n = frame(m.envelope.ByteSizeLong());
  if (!m.payload.empty()) n += frame(m.payload.size());
  return n;
}

// Packets of kPacket bytes that `bytes` fill.
inline size_t packets(size_t bytes) { return (bytes + kPacket - 1) / kPacket; }

// A probe, and a push proper (one that is not a probe).
inline bool isProbe(const Message& m) { return m.envelope.has_push() && m.envelope.push().probe(); }
inline bool isPush(const Message& m) { return m.envelope.has_push() && !m.envelope.push().probe(); }

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
  double round_deadline = 0.0;      // the welcome's round_deadline_seconds (0 = not said)
  double deadline_left = 0.0;       // each round start's deadline_seconds_left (0 = not said)
  bool acks_leave = false;          // the welcome's acks_leave
  bool plans_by_link_time = false;  // the welcome's plans_by_link_time
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
    settings.tuning.method = tuning::TunerKind::kFixed;  // the cap; tests of the tuners set theirs
    settings.coordinator_patience_seconds = 30.0;
    settings.link.packet_bytes = kPacket;
    settings.link.calibration_max_seconds = 0.0;  // the whole train; the skip's tests set theirs
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
    w->set_plans_by_link_time(plans_by_link_time);
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

}  // namespace tern::testing
