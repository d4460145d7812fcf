#pragma once
// The coordinator core on the test's clock with a softmax model of d = 8 and two required
// workers, and the helpers the coordinator core's tests share: joins, pushes, heartbeats and
// leaves as a worker sends them, and readers of what the core sends back.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/ml/model.hpp"
#include "driven_coordinator.hpp"
#include "push_message.hpp"

namespace tern::testing {

struct Harness {
  double now = 0.0;
  config::CoordinatorSettings settings;
  std::unique_ptr<testing::DrivenCoordinator> core;
  uint64_t session = 42;

  Harness() {
    settings.min_workers = 2;
    settings.max_rounds = 100;
    settings.model.kind = "softmax";
    settings.model.features = 3;
    settings.model.classes = 2;
    settings.allocation.budget.mean_ratio = 0.5;
    core = std::make_unique<testing::DrivenCoordinator>(settings, ml::makeModel(settings.model),
                                                        nullptr, session, [this] { return now; });
  }

  std::vector<Outgoing> join(const std::string& peer, const std::string& name, uint64_t samples,
                             uint64_t instance = 0) {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_join()->set_worker_name(name);
    m.envelope.mutable_join()->set_sample_count(samples);
    m.envelope.mutable_join()->set_instance(instance);
    return core->onMessage(peer, m, 10, now);
  }

  // A fresh core whose rounds close after `deadline` seconds and whose workers are marked gone
  // after `patience` seconds of silence.
  void withTimers(double deadline, double patience) {
    settings.round_deadline_seconds = deadline;
    settings.worker_patience_seconds = patience;
    core = std::make_unique<testing::DrivenCoordinator>(settings, ml::makeModel(settings.model),
                                                        nullptr, session, [this] { return now; });
  }

  Message push(uint32_t id, uint64_t round, std::vector<float> g) {
    return testing::identityPush(session, id, round, g);
  }

  // Joins workers a (100 samples, peer A) and b (300 samples, peer B); returns their ids.
  std::pair<uint32_t, uint32_t> joinAB();
  // Joins worker `name` (100 samples) from `peer`, saying whether it answers a Finish with a
  // Leave; returns its id.
  uint32_t joinAnsweringFinish(const std::string& peer, const std::string& name, bool acks = true);

  // Worker `id`'s heartbeat in this session.
  Message heartbeat(uint32_t id) const {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_heartbeat()->set_session(session);
    m.envelope.mutable_heartbeat()->set_worker_id(id);
    return m;
  }

  Message leave() const {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_leave()->set_session(session);
    m.envelope.mutable_leave()->set_reason("shutting down");
    return m;
  }
};

// The id the welcome to `peer` among `out` gives; fails the test where there is none.
inline uint32_t idOf(const std::vector<Outgoing>& out, const std::string& peer) {
  for (const auto& o : out) {
    if (o.peer == peer && o.message.envelope.has_welcome()) {
      return o.message.envelope.welcome().worker_id();
    }
  }
  FAIL("no welcome for " << peer);
  return 0;
}

inline uint32_t Harness::joinAnsweringFinish(const std::string& peer, const std::string& name,
                                             bool acks) {
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_join()->set_worker_name(name);
  m.envelope.mutable_join()->set_sample_count(100);
  m.envelope.mutable_join()->set_acks_finish(acks);
  return idOf(core->onMessage(peer, m, 10, now), peer);
}

inline std::pair<uint32_t, uint32_t> Harness::joinAB() {
  const uint32_t a = idOf(join("A", "a", 100), "A");
  return {a, idOf(join("B", "b", 300), "B")};
}

// Worker `id`'s entry in the record of the round the core closed last.
inline server::WorkerRecord recordOf(const testing::DrivenCoordinator& core, uint32_t id) {
  for (const auto& w : core.lastRecord().workers) {
    if (w.id == id) return w;
  }
  FAIL("worker " << id << " not in the record");
  return {};
}

// d values start, start + step, start + 2 step, ...
inline std::vector<float> ramp(size_t d, float start, float step) {
  std::vector<float> v(d);
  for (size_t j = 0; j < d; ++j) v[j] = start + step * float(j);
  return v;
}
// Whether `out` holds an error of `code`.
inline bool hasError(const std::vector<Outgoing>& out, wire::Error::Code code) {
  for (const auto& o : out) {
    if (o.message.envelope.has_error() && o.message.envelope.error().code() == code) return true;
  }
  return false;
}

// The caps of the round starts for `round` among the messages, by peer.
inline std::map<std::string, uint32_t> roundStartCaps(const std::vector<Outgoing>& out,
                                                      uint64_t round) {
  std::map<std::string, uint32_t> caps;
  for (const auto& o : out) {
    if (o.message.envelope.has_round_start() && o.message.envelope.round_start().round() == round) {
      caps[o.peer] = o.message.envelope.round_start().cap();
    }
  }
  return caps;
}
// Moves `more` onto the end of `to`.
inline void append(std::vector<Outgoing>& to, std::vector<Outgoing> more) {
  to.insert(to.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

}  // namespace tern::testing
