// The coordinator core against bad input: every rejection is answered with a coded error, counted
// by reason, and leaves the model untouched.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "common/compression/compressor.hpp"
#include "common/ml/dataset.hpp"
#include "common/util/printable.hpp"
#include "driven_coordinator.hpp"
#include "push_message.hpp"

using namespace tern;

namespace {

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

uint32_t idOf(const std::vector<Outgoing>& out, const std::string& peer) {
  for (const auto& o : out) {
    if (o.peer == peer && o.message.envelope.has_welcome()) {
      return o.message.envelope.welcome().worker_id();
    }
  }
  FAIL("no welcome for " << peer);
  return 0;
}

uint32_t Harness::joinAnsweringFinish(const std::string& peer, const std::string& name, bool acks) {
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_join()->set_worker_name(name);
  m.envelope.mutable_join()->set_sample_count(100);
  m.envelope.mutable_join()->set_acks_finish(acks);
  return idOf(core->onMessage(peer, m, 10, now), peer);
}

std::pair<uint32_t, uint32_t> Harness::joinAB() {
  const uint32_t a = idOf(join("A", "a", 100), "A");
  return {a, idOf(join("B", "b", 300), "B")};
}

// Worker `id`'s entry in the record of the round the core closed last.
server::WorkerRecord recordOf(const testing::DrivenCoordinator& core, uint32_t id) {
  for (const auto& w : core.lastRecord().workers) {
    if (w.id == id) return w;
  }
  FAIL("worker " << id << " not in the record");
  return {};
}

// The tuner report recorded for a worker: the level it sent and the two predictions.
void checkReport(const server::WorkerRecord& w, uint32_t level, double cost, double improvement,
                 double step = 0.0) {
  CHECK(w.level == level);
  CHECK(w.predicted_cost == cost);
  CHECK(w.predicted_improvement == improvement);
  CHECK(w.predicted_step == step);
}

// d values start, start + step, start + 2 step, ...
std::vector<float> ramp(size_t d, float start, float step) {
  std::vector<float> v(d);
  for (size_t j = 0; j < d; ++j) v[j] = start + step * float(j);
  return v;
}

bool hasError(const std::vector<Outgoing>& out, wire::Error::Code code) {
  for (const auto& o : out) {
    if (o.message.envelope.has_error() && o.message.envelope.error().code() == code) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("bad pushes are rejected, counted by reason, and never touch the model") {
  Harness h;
  uint32_t a = idOf(h.join("A", "a", 100), "A");
  uint32_t b = idOf(h.join("B", "b", 300), "B");
  const size_t d = h.core->parameters().size();
  REQUIRE(d == 8);
  const auto before = h.core->parameters();

  // Wrong protocol version.
  auto m = h.push(a, 0, std::vector<float>(d, 1.0f));
  m.envelope.set_version(99);
  CHECK(hasError(h.core->onMessage("A", m, 50, h.now), wire::Error::BAD_VERSION));
  // Foreign session.
  m = h.push(a, 0, std::vector<float>(d, 1.0f));
  m.envelope.mutable_push()->set_session(7);
  CHECK(hasError(h.core->onMessage("A", m, 50, h.now), wire::Error::UNKNOWN_SESSION));
  // Unknown peer.
  CHECK(hasError(h.core->onMessage("Z", h.push(a, 0, std::vector<float>(d, 1.0f)), 50, h.now),
                 wire::Error::UNKNOWN_SESSION));
  // Another worker's id.
  CHECK(hasError(h.core->onMessage("A", h.push(b, 0, std::vector<float>(d, 1.0f)), 50, h.now),
                 wire::Error::MALFORMED));
  // Wrong dimension.
  CHECK(hasError(h.core->onMessage("A", h.push(a, 0, std::vector<float>(d + 1, 1.0f)), 50, h.now),
                 wire::Error::BAD_PAYLOAD));
  // NaN values.
  // NaN values: the compressors refuse to produce them, so patch one into valid wire bytes
  // (identity sends fp32 values; 2.5f is a bit pattern that occurs only where we put it).
  auto marked = std::vector<float>(d, 1.0f);
  marked[3] = 2.5f;
  m = h.push(a, 0, marked);
  const float two_and_half = 2.5f, nan = std::numeric_limits<float>::quiet_NaN();
  size_t patched = 0;
  for (size_t i = 0; i + 4 <= m.payload.size(); ++i) {
    if (std::memcmp(&m.payload[i], &two_and_half, 4) == 0) {
      std::memcpy(&m.payload[i], &nan, 4);
      ++patched;
    }
  }
  REQUIRE(patched == 1);
  CHECK(hasError(h.core->onMessage("A", m, 50, h.now), wire::Error::BAD_PAYLOAD));
  // Truncated payload.
  m = h.push(a, 0, std::vector<float>(d, 1.0f));
  m.payload.resize(m.payload.size() - 3);
  CHECK(hasError(h.core->onMessage("A", m, 50, h.now), wire::Error::BAD_PAYLOAD));
  // Future round.
  CHECK(hasError(h.core->onMessage("A", h.push(a, 5, std::vector<float>(d, 1.0f)), 50, h.now),
                 wire::Error::BAD_ROUND));
  // Unparseable frames reported by the daemon.
  CHECK(hasError(h.core->onMalformed("A", "envelope does not parse"), wire::Error::MALFORMED));

  CHECK(h.core->parameters() == before);
  CHECK(h.core->round() == 0);
  const auto& r = h.core->rejections();
  CHECK(r.at("bad_version") == 1);
  CHECK(r.at("unknown_session") == 2);
  CHECK(r.at("wrong_worker_id") == 1);
  CHECK(r.at("bad_payload") == 3);
  CHECK(r.at("late_or_future_round") == 1);
  CHECK(r.at("envelope does not parse") == 1);
  CHECK(h.core->rejectedTotal() == 9);
}

TEST_CASE("the aggregate is the data-share-weighted mean and a duplicate push is applied once") {
  Harness h;
  uint32_t a = idOf(h.join("A", "a", 100), "A");
  uint32_t b = idOf(h.join("B", "b", 300), "B");
  const size_t d = h.core->parameters().size();
  const auto x0 = h.core->parameters();
  std::vector<float> ga(d), gb(d);
  for (size_t j = 0; j < d; ++j) {
    ga[j] = float(j) * 0.5f;
    gb[j] = 1.0f - float(j);
  }
  auto out = h.core->onMessage("A", h.push(a, 0, ga), 50, h.now);
  CHECK(h.core->round() == 0);
  // The duplicate is acknowledged again but does not count twice or close the round.
  out = h.core->onMessage("A", h.push(a, 0, ga), 50, h.now);
  CHECK(h.core->round() == 0);
  CHECK(h.core->rejections().at("duplicate") == 1);
  out = h.core->onMessage("B", h.push(b, 0, gb), 50, h.now);
  CHECK(h.core->round() == 1);
  // x1 = x0 - lr * (0.25 ga + 0.75 gb), computed independently in double.
  const double lr = h.settings.optimizer.lr;
  for (size_t j = 0; j < d; ++j) {
    double expect = double(x0[j]) - lr * (0.25 * ga[j] + 0.75 * gb[j]);
    CHECK(h.core->parameters()[j] == doctest::Approx(expect).epsilon(1e-6));
  }
  // A push for the closed round is late: dropped and counted, the model keeps its value.
  auto x1 = h.core->parameters();
  out = h.core->onMessage("A", h.push(a, 0, ga), 50, h.now);
  CHECK(hasError(out, wire::Error::BAD_ROUND));
  CHECK(h.core->parameters() == x1);
}

TEST_CASE("a round closes at its deadline without a silent worker, which is later marked gone") {
  Harness h;
  h.withTimers(2.0, 5.0);
  uint32_t a = idOf(h.join("A", "a", 100), "A");
  idOf(h.join("B", "b", 100), "B");
  const size_t d = h.core->parameters().size();
  h.now = 1.0;
  h.core->onMessage("A", h.push(a, 0, std::vector<float>(d, 1.0f)), 50, h.now);
  CHECK(h.core->round() == 0);
  h.now = 2.5;  // past the deadline: the round closes with A alone
  h.core->onTick();
  CHECK(h.core->round() == 1);
  CHECK(h.core->lastRecord().participants == 1);
  // A keeps talking (heartbeats), B stays silent past its patience.
  for (double t = 3.0; t <= 6.0; t += 1.0) {
    h.now = t;
    const Message hb = h.heartbeat(0);
    h.core->onMessage("A", hb, 10, h.now);
    h.core->onTick();
  }
  CHECK(h.core->aliveWorkers() == 1);
}

TEST_CASE("a link model no link could have is dropped and counted, and its gradient still counts") {
  Harness h;
  uint32_t a = idOf(h.join("A", "a", 100), "A");
  uint32_t b = idOf(h.join("B", "b", 300), "B");
  const size_t d = h.core->parameters().size();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();

  auto withLink = [&](uint64_t round, double a_s, double b_s, double r2, double a_se, double b_se,
                      uint32_t packet) {
    auto m = h.push(a, round, std::vector<float>(d, 1.0f));
    auto* l = m.envelope.mutable_push()->mutable_link();
    l->set_a_seconds(a_s);
    l->set_b_seconds_per_packet(b_s);
    l->set_r2(r2);
    l->set_a_stderr(a_se);
    l->set_b_stderr(b_se);
    l->set_packet_bytes(packet);
    l->set_samples(12);
    return m;
  };
  auto acked = [](const std::vector<Outgoing>& out) {
    for (const auto& o : out) {
      if (o.message.envelope.has_ack()) return true;
    }
    return false;
  };

  // A token bucket holding four packets, a = -4b, is a link's, standard errors not yet
  // computable are +inf: the model is kept.
  auto out = h.core->onMessage("A", withLink(0, -4e-3, 1e-3, 0.97, inf, inf, 1448), 50, h.now);
  CHECK_FALSE(hasError(out, wire::Error::MALFORMED));
  CHECK(acked(out));
  h.core->onMessage("B", h.push(b, 0, std::vector<float>(d, 1.0f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  CHECK(recordOf(*h.core, a).link.a_seconds() == -4e-3);
  CHECK(recordOf(*h.core, a).link.b_seconds_per_packet() == 1e-3);

  struct Bad {
    const char* what;
    Message m;
  };
  std::vector<Bad> bad = {
      {"NaN a", withLink(1, nan, 1e-3, 0.9, 0, 0, 1448)},
      {"infinite b", withLink(1, 1e-3, inf, 0.9, 0, 0, 1448)},
      {"negative b", withLink(1, 1e-3, -1e-3, 0.9, 0, 0, 1448)},
      // No bucket carries more than the largest message (64 MiB: 46,346 packets of 1448 bytes).
      {"a below -b times the largest message", withLink(1, -50.0, 1e-3, 0.9, 0, 0, 1448)},
      {"a of a year", withLink(1, 3.2e7, 1e-3, 0.9, 0, 0, 1448)},
      {"NaN stderr", withLink(1, 1e-3, 1e-3, 0.9, 0, nan, 1448)},
      {"negative stderr", withLink(1, 1e-3, 1e-3, 0.9, -1e-4, 0, 1448)},
      {"r2 above 1", withLink(1, 1e-3, 1e-3, 1.5, 0, 0, 1448)},
      {"packet of 8 bytes", withLink(1, 1e-3, 1e-3, 0.9, 0, 0, 8)},
      // A 1448-byte packet in 1e-300 s (the allocator would give such a worker every
      // coordinate for free); 1 Tbit/s is the floor: 1.16e-8 s.
      {"b of 1e-300 s", withLink(1, 1e-3, 1e-300, 0.9, 0, 0, 1448)},
      {"b just under a packet at 1 Tbit/s", withLink(1, 1e-3, 1.1e-8, 0.9, 0, 0, 1448)},
  };
  for (auto& c : bad) {
    CAPTURE(c.what);
    auto o = h.core->onMessage("A", c.m, 50, h.now);
    CHECK(hasError(o, wire::Error::MALFORMED));
    CHECK(acked(o));  // the first is the round's gradient, the others its duplicates
  }
  CHECK(h.core->rejections().at("bad_link_model") == bad.size());
  CHECK(h.core->rejections().at("duplicate") == bad.size() - 1);

  // B's push closes round 1 with both gradients; A's last good model is the one kept.
  const auto before = h.core->parameters();
  h.core->onMessage("B", h.push(b, 1, std::vector<float>(d, 1.0f)), 50, h.now);
  REQUIRE(h.core->round() == 2);
  CHECK(h.core->lastRecord().participants == 2);
  CHECK(h.core->parameters() != before);
  CHECK(recordOf(*h.core, a).link.a_seconds() == -4e-3);
  CHECK(recordOf(*h.core, a).link.b_seconds_per_packet() == 1e-3);
}

TEST_CASE("the tuner's report with a push is recorded per round, an unusable one counted") {
  Harness h;
  h.withTimers(1.0, 1000.0);
  uint32_t a = idOf(h.join("A", "a", 100), "A");
  uint32_t b = idOf(h.join("B", "b", 300), "B");
  const size_t d = h.core->parameters().size();
  auto reported = [&](uint32_t id, uint64_t round, uint32_t level, double cost, double improvement,
                      double step = 0.0) {
    auto m = h.push(id, round, std::vector<float>(d, 0.5f));
    m.envelope.mutable_push()->set_level(level);
    m.envelope.mutable_push()->set_predicted_cost(cost);
    m.envelope.mutable_push()->set_predicted_improvement(improvement);
    m.envelope.mutable_push()->set_predicted_step(step);
    return m;
  };

  h.core->onMessage("A", reported(a, 0, 3, 412.0, 0.25, 0.1), 50, h.now);
  h.core->onMessage("B", reported(b, 0, 8, 0.0065, 1e-3, 0.004), 50, h.now);
  REQUIRE(h.core->round() == 1);
  checkReport(recordOf(*h.core, a), 3, 412.0, 0.25, 0.1);
  checkReport(recordOf(*h.core, b), 8, 0.0065, 1e-3, 0.004);
  CHECK(h.core->badReports() == 0);

  // Round 1: A's report is none a tuner makes (a level beyond the model's size), B's is. A's
  // gradient is applied all the same: the model moves as if its report were usable.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const auto x1 = h.core->parameters();
  h.core->onMessage("A", reported(a, 1, uint32_t(d) + 1, 5.0, 0.1), 50, h.now);
  h.core->onMessage("B", reported(b, 1, 5, 300.0, 0.02), 50, h.now);
  REQUIRE(h.core->round() == 2);
  CHECK(h.core->badReports() == 1);
  CHECK(h.core->rejectedTotal() == 0);
  checkReport(recordOf(*h.core, a), 0, 0.0, 0.0);
  checkReport(recordOf(*h.core, b), 5, 300.0, 0.02);
  const double lr = h.settings.optimizer.lr;
  for (size_t j = 0; j < d; ++j) {
    CHECK(h.core->parameters()[j] == doctest::Approx(double(x1[j]) - lr * 0.5).epsilon(1e-6));
  }

  // Round 2: a NaN prediction is unusable; B does not push, so the row (closed at the deadline)
  // has no report of B's, though it had one the round before.
  h.core->onMessage("A", reported(a, 2, 4, nan, 0.1), 50, h.now);
  CHECK(h.core->badReports() == 2);
  h.now += 2.0;
  h.core->onTick();
  REQUIRE(h.core->round() == 3);
  checkReport(recordOf(*h.core, b), 0, 0.0, 0.0);

  // Round 3: a negative cost is unusable, and a duplicate with a usable report changes nothing.
  h.core->onMessage("A", reported(a, 3, 4, -1.0, 0.1), 50, h.now);
  h.core->onMessage("A", reported(a, 3, 4, 7.0, 0.5), 50, h.now);
  CHECK(h.core->rejections().at("duplicate") == 1);
  h.core->onMessage("B", reported(b, 3, 6, 1.0, inf), 50, h.now);
  REQUIRE(h.core->round() == 4);
  CHECK(h.core->badReports() == 4);

  checkReport(recordOf(*h.core, a), 0, 0.0, 0.0);
  checkReport(recordOf(*h.core, b), 0, 0.0, 0.0);

  // Round 4: A pushes a usable report and then leaves: its acknowledged push counts in the
  // round, and its report is in the round's row.
  h.core->onMessage("A", reported(a, 4, 7, 8.0, 0.3), 50, h.now);
  h.core->onMessage("A", h.leave(), 10, h.now);
  h.core->onMessage("B", reported(b, 4, 6, 1.0, 0.2), 50, h.now);
  REQUIRE(h.core->round() == 5);
  CHECK(h.core->lastRecord().participants == 2);
  checkReport(recordOf(*h.core, a), 7, 8.0, 0.3);
  checkReport(recordOf(*h.core, b), 6, 1.0, 0.2);
  CHECK(h.core->badReports() == 4);
  // Round 5: B alone; A, gone, pushed nothing this round and shows no report.
  h.core->onMessage("B", reported(b, 5, 6, 1.0, 0.2), 50, h.now);
  REQUIRE(h.core->round() == 6);
  CHECK(h.core->lastRecord().participants == 1);
  checkReport(recordOf(*h.core, a), 0, 0.0, 0.0);
  // Rounds 6 and 7: a step that is no step (negative, NaN) makes a report unusable too.
  h.core->onMessage("B", reported(b, 6, 6, 1.0, 0.2, -0.1), 50, h.now);
  h.core->onMessage("B", reported(b, 7, 6, 1.0, 0.2, nan), 50, h.now);
  REQUIRE(h.core->round() == 8);
  CHECK(h.core->badReports() == 6);
  checkReport(recordOf(*h.core, b), 0, 0.0, 0.0);
}

TEST_CASE("an acknowledged push of a worker that leaves or is marked gone counts in its round") {
  for (const bool leaves : {true, false}) {
    CAPTURE(leaves);
    Harness h;
    h.withTimers(100.0, 5.0);
    const auto [a, b] = h.joinAB();
    const size_t d = h.core->parameters().size();
    const auto x0 = h.core->parameters();
    const auto ga = ramp(d, 1.0f, 1.0f), gb = ramp(d, 0.0f, -0.5f);
    auto out = h.core->onMessage("A", h.push(a, 0, ga), 50, h.now);
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].message.envelope.has_ack());
    if (leaves) {
      h.core->onMessage("A", h.leave(), 10, h.now);
    } else {
      // B stays in touch; A is silent past its patience and is marked gone.
      h.now = 4.0;
      const Message hb = h.heartbeat(b);
      h.core->onMessage("B", hb, 10, h.now);
      h.now = 6.0;
      h.core->onTick();
      REQUIRE(h.core->aliveWorkers() == 1);
    }
    CHECK(h.core->round() == 0);
    h.core->onMessage("B", h.push(b, 0, gb), 50, h.now);
    REQUIRE(h.core->round() == 1);
    CHECK(h.core->lastRecord().participants == 2);
    // x1 = x0 - lr (0.25 ga + 0.75 gb) by the workers' samples, computed in double.
    const double lr = h.settings.optimizer.lr;
    for (size_t j = 0; j < d; ++j) {
      const double expect = double(x0[j]) - lr * (0.25 * ga[j] + 0.75 * gb[j]);
      CHECK(h.core->parameters()[j] == doctest::Approx(expect).epsilon(1e-6));
    }
  }
}

TEST_CASE(
    "a step that huge finite pushes would overflow is not taken, counted, and kept over a "
    "restart, and the momentum goes on from before it") {
  Harness h;
  h.settings.optimizer.lr = 10.0;
  h.settings.optimizer.momentum = 0.5;
  h.withTimers(1000.0, 1000.0);
  const auto [a, b] = h.joinAB();
  const size_t d = h.core->parameters().size();
  const auto x0 = h.core->parameters();
  const auto g0 = ramp(d, -0.3f, 0.1f), g2 = ramp(d, 0.05f, -0.02f);
  // Round 0: an ordinary step, x1 = x0 - lr v0 with v0 = g0 (both workers push g0).
  h.core->onMessage("A", h.push(a, 0, g0), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, g0), 50, h.now);
  REQUIRE(h.core->round() == 1);
  const auto x1 = h.core->parameters();
  // Round 1: finite pushes whose step, lr * 3e38, is beyond a float.
  std::vector<float> huge(d, 0.0f);
  huge[0] = 3e38f;
  h.core->onMessage("A", h.push(a, 1, huge), 50, h.now);
  std::vector<Outgoing> out;
  CHECK_NOTHROW(out = h.core->onMessage("B", h.push(b, 1, huge), 50, h.now));
  CHECK(h.core->round() == 2);
  CHECK(h.core->stepsRefused() == 1);
  CHECK(h.core->parameters() == x1);
  // Round 2: the momentum is v0's, not the refused step's: x3 = x1 - lr (0.5 g0 + g2).
  h.core->onMessage("A", h.push(a, 2, g2), 50, h.now);
  h.core->onMessage("B", h.push(b, 2, g2), 50, h.now);
  REQUIRE(h.core->round() == 3);
  for (size_t j = 0; j < d; ++j) {
    CAPTURE(j);
    const double x3 = double(x1[j]) - 10.0 * (0.5 * double(g0[j]) + double(g2[j]));
    CHECK(h.core->parameters()[j] == doctest::Approx(x3).epsilon(1e-5));
    CHECK(std::isfinite(h.core->parameters()[j]));
  }
  CHECK(x1 != x0);
  // The counter survives a restart from the checkpoint.
  auto restored = testing::DrivenCoordinator::restore(
      h.settings, ml::makeModel(h.settings.model), nullptr, 43, [&h] { return h.now; },
      h.core->checkpoint());
  CHECK(restored->stepsRefused() == 1);
  CHECK(restored->parameters() == h.core->parameters());
}

TEST_CASE(
    "a join declaring more samples than a worker may have is refused, and shares stay in [0, 1]") {
  Harness h;
  CHECK(hasError(h.join("A", "a", uint64_t{1} << 63), wire::Error::MALFORMED));
  CHECK(hasError(h.join("A", "a", testing::DrivenCoordinator::kMaxSamplesPerWorker + 1),
                 wire::Error::MALFORMED));
  CHECK(h.core->rejections().at("bad_join") == 2);
  // Two workers at the limit each hold half of the data.
  const uint32_t a = idOf(h.join("A", "a", testing::DrivenCoordinator::kMaxSamplesPerWorker), "A");
  const uint32_t b = idOf(h.join("B", "b", testing::DrivenCoordinator::kMaxSamplesPerWorker), "B");
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, 0, std::vector<float>(d, 1.0f)), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, std::vector<float>(d, 1.0f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  CHECK(recordOf(*h.core, a).share == 0.5);
  CHECK(recordOf(*h.core, b).share == 0.5);
  for (float x : h.core->parameters()) CHECK(std::isfinite(x));
}

TEST_CASE("cost-aware prices each worker's link by bytes, whatever packet size it fits b for") {
  // Two workers with the same data and the same link, 1 ms per 1448 bytes: one fits b per
  // 1448-byte packet, the other per 9000-byte packet (6.2 times the seconds per packet). Priced
  // by bytes they are alike and get the same cap.
  Harness h;
  h.settings.model.features = 3000;  // d = 6002: the seconds budget binds
  h.settings.allocation.method = tern::allocation::Method::kCostAware;
  h.settings.allocation.reallocate_every = 1;
  h.settings.allocation.budget.seconds_per_round = 0.01;
  h.withTimers(1000.0, 1000.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  const uint32_t b = idOf(h.join("B", "b", 100), "B");
  const size_t d = h.core->parameters().size();
  auto withLink = [&](uint32_t id, uint64_t round, uint32_t packet_bytes) {
    auto m = h.push(id, round, std::vector<float>(d, 0.01f));
    auto* l = m.envelope.mutable_push()->mutable_link();
    l->set_a_seconds(0.002);
    l->set_b_seconds_per_packet(0.001 * packet_bytes / 1448.0);
    l->set_packet_bytes(packet_bytes);
    l->set_samples(20);
    l->set_r2(0.99);
    return m;
  };
  for (uint64_t r = 0; r < 2; ++r) {
    h.core->onMessage("A", withLink(a, r, 1448), 50, h.now);
    h.core->onMessage("B", withLink(b, r, 9000), 50, h.now);
    REQUIRE(h.core->round() == r + 1);
  }
  const auto ca = recordOf(*h.core, a).cap, cb = recordOf(*h.core, b).cap;
  CHECK(ca > 100);
  CHECK(ca < d);
  CHECK(std::abs(int64_t(ca) - int64_t(cb)) <= 1);
}

TEST_CASE("a name held by a live worker process is refused to another, kept on a reconnect") {
  Harness h;
  h.withTimers(2.0, 10.0);
  const uint32_t a = idOf(h.join("A", "pi", 100, 7), "A");
  // Another process configured with the same name: refused, and the holder keeps its place.
  auto out = h.join("B", "pi", 300, 8);
  CHECK(hasError(out, wire::Error::NAME_TAKEN));
  CHECK(h.core->rejections().at("name_taken") == 1);
  CHECK(h.core->aliveWorkers() == 1);
  // The holder on a new connection (same process): the name and id stay its own.
  CHECK(idOf(h.join("A2", "pi", 100, 7), "A2") == a);
  // Once the holder is marked gone the name is free for the other process, under the same id.
  h.now += 10.5;
  h.core->onTick();
  CHECK(idOf(h.join("B", "pi", 300, 8), "B") == a);
  // Workers that give no instance (older or test workers) re-join by name as before.
  CHECK(idOf(h.join("C", "pi", 300, 0), "C") == a);
}

TEST_CASE("a join cut from another partition than a live worker's is refused, saying both") {
  Harness h;
  h.withTimers(2.0, 10.0);
  auto joinCut = [&](const std::string& peer, const std::string& name, uint64_t fingerprint,
                     uint32_t index, uint32_t total) {
    Message m;
    m.envelope = makeEnvelope();
    auto* j = m.envelope.mutable_join();
    j->set_worker_name(name);
    j->set_sample_count(100);
    j->set_partition_fingerprint(fingerprint);
    j->set_shard_index(index);
    j->set_shard_total(total);
    return h.core->onMessage(peer, m, 10, h.now);
  };
  const uint32_t a = idOf(joinCut("A", "a", 11, 0, 2), "A");
  // A second worker that cut its shard with data.shard.total 3: refused, with both shards named.
  auto out = joinCut("B", "b", 22, 1, 3);
  REQUIRE(hasError(out, wire::Error::PARTITION_MISMATCH));
  const std::string text = out[0].message.envelope.error().text();
  CHECK(text.find("shard 1 of 3") != std::string::npos);
  CHECK(text.find("'a''s shard 0 of 2") != std::string::npos);
  CHECK(h.core->rejections().at("partition_mismatch") == 1);
  CHECK(h.core->aliveWorkers() == 1);
  // The same partition: admitted. A worker that says none (older, or the simulator's): admitted.
  CHECK(idOf(joinCut("B", "b", 11, 1, 2), "B") != a);
  CHECK(idOf(joinCut("C", "c", 0, 0, 0), "C") != a);
  // A live worker re-joining with another partition is compared with the others, not itself.
  CHECK(hasError(joinCut("A", "a", 33, 0, 4), wire::Error::PARTITION_MISMATCH));
  // Once every worker of the old partition is gone, a new one may begin.
  h.now += 10.5;
  h.core->onTick();
  REQUIRE(h.core->aliveWorkers() == 0);
  CHECK(idOf(joinCut("D", "d", 33, 0, 4), "D") != a);  // idOf fails the test without a welcome
  CHECK(h.core->aliveWorkers() == 1);
}

TEST_CASE("a join whose worker could not take the model's welcome is refused, saying why") {
  // The largest frame a worker is sent, measured: a round start after dense pushes carries a
  // dense update, the model's floats and the update's header.
  size_t largest = 0;
  {
    Harness run;
    const auto [a, b] = run.joinAB();
    const size_t d = run.core->parameters().size();
    run.core->onMessage("A", run.push(a, 0, ramp(d, 1.0f, 1.0f)), 50, run.now);
    for (const auto& o : run.core->onMessage("B", run.push(b, 0, ramp(d, 2.0f, 1.0f)), 50, run.now))
      if (o.message.envelope.has_round_start())
        largest = std::max(largest, o.message.payload.size());
  }
  Harness h;
  const size_t model_bytes = h.core->parameters().size() * sizeof(float);
  REQUIRE(largest > model_bytes);
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_join()->set_worker_name("small");
  m.envelope.mutable_join()->set_sample_count(10);
  // Room for the model's welcome but not for a dense update: its rounds would be dropped.
  m.envelope.mutable_join()->set_max_message_bytes(model_bytes);
  auto out = h.core->onMessage("S", m, 10, h.now);
  REQUIRE(hasError(out, wire::Error::MESSAGE_LIMIT));
  CHECK(out[0].message.envelope.error().text().find("at least " + std::to_string(largest)) !=
        std::string::npos);
  CHECK(h.core->aliveWorkers() == 0);
  m.envelope.mutable_join()->set_max_message_bytes(largest - 1);
  CHECK(hasError(h.core->onMessage("S", m, 10, h.now), wire::Error::MESSAGE_LIMIT));
  // Room for exactly the largest frame: welcomed.
  m.envelope.mutable_join()->set_max_message_bytes(largest);
  CHECK(idOf(h.core->onMessage("S", m, 10, h.now), "S") == 0);
}

TEST_CASE("workers gone for long are forgotten, so the table does not grow with every name seen") {
  Harness h;
  h.withTimers(2.0, 3.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  // Forty short-lived workers (killed, never back) join and fall silent.
  for (int i = 0; i < 40; ++i) {
    const std::string number = std::to_string(i);
    const std::string peer = std::string("X").append(number);
    idOf(h.join(peer, std::string("x").append(number), 10), peer);
  }
  const Message hb = h.heartbeat(a);
  auto beat = [&] { h.core->onMessage("A", hb, 10, h.now); };
  h.now += 4.0;
  beat();
  h.core->onTick();  // marked gone, still known: one coming back now keeps its id
  CHECK(h.core->aliveWorkers() == 1);
  CHECK(idOf(h.join("X0b", "x0", 10), "X0b") == 1);
  // Past the horizon (600 s here: ten patiences are less) the silent ones are forgotten; the
  // worker that kept sending heartbeats, and the one that came back, stay.
  for (int t = 0; t < 61; ++t) {
    h.now += 10.0;
    beat();
    h.core->onMessage(
        "X0b",
        [&] {
          Message m = hb;
          m.envelope.mutable_heartbeat()->set_worker_id(1);
          return m;
        }(),
        10, h.now);
    h.core->onTick();
  }
  CHECK(h.core->aliveWorkers() == 2);
  // The checkpoint holds the two alone.
  wire::Checkpoint cp;
  REQUIRE(cp.ParseFromString(h.core->checkpoint()));
  CHECK(cp.workers_size() == 2);
  // A forgotten name that returns joins as a new worker, under a new id.
  CHECK(idOf(h.join("X5b", "x5", 10), "X5b") == 41);
}

TEST_CASE("past max_workers known workers a new name is refused until one is forgotten") {
  Harness h;
  h.settings.max_workers = 3;
  h.withTimers(2.0, 3.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  for (const char* name : {"b", "c"})
    idOf(h.join(std::string("P") + name, name, 10), std::string("P") + name);
  // A flood of new names: each refused and counted, the table stays at three.
  for (int i = 0; i < 50; ++i) {
    const std::string name = "flood" + std::to_string(i);
    // Appended, not "F" + ...: GCC 12 warns (-Wrestrict, a false positive) on operator+ there.
    auto out = h.join(std::string("F").append(std::to_string(i)), name, 10);
    REQUIRE(hasError(out, wire::Error::TOO_MANY_WORKERS));
  }
  CHECK(h.core->rejections().at("too_many_workers") == 50);
  CHECK(h.core->aliveWorkers() == 3);
  // A known name still re-joins.
  CHECK(idOf(h.join("A2", "a", 100), "A2") == a);
  // Once b and c have been silent past the horizon (600 s) they are forgotten, and a new name
  // gets in.
  const Message hb = h.heartbeat(a);
  for (int t = 0; t < 70; ++t) {
    h.now += 10.0;
    h.core->onMessage("A2", hb, 10, h.now);
    h.core->onTick();
  }
  CHECK(idOf(h.join("N", "newcomer", 10), "N") == 3);
}

TEST_CASE("a worker gone right after its push is forgotten too, once its round has closed") {
  Harness h;
  h.withTimers(2.0, 3.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  const uint32_t b = idOf(h.join("B", "b", 100), "B");
  const size_t d = h.core->parameters().size();
  // b pushes and falls silent (a fast worker, then unplugged) while the round waits for a.
  h.core->onMessage("B", h.push(b, 0, std::vector<float>(d, 0.5f)), 50, h.now);
  const Message hb = h.heartbeat(a);
  h.now += 4.0;
  h.core->onMessage("A", hb, 10, h.now);
  h.core->onTick();  // b marked gone, its push still in the round
  REQUIRE(h.core->aliveWorkers() == 1);
  h.core->onMessage("A", h.push(a, 0, std::vector<float>(d, 0.5f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  // Far past the horizon, a still beating, b silent throughout.
  for (int t = 0; t < 70; ++t) {
    h.now += 10.0;
    h.core->onMessage("A", hb, 10, h.now);
    h.core->onTick();
  }
  CHECK(h.core->aliveWorkers() == 1);
  wire::Checkpoint cp;
  REQUIRE(cp.ParseFromString(h.core->checkpoint()));
  CHECK(cp.workers_size() == 1);
}

TEST_CASE("every round start says the learning rate the round's pushes are applied with") {
  Harness h;
  h.settings.optimizer.lr = 0.2;
  h.settings.optimizer.decay = 0.5;
  h.settings.optimizer.decay_every = 2;
  h.withTimers(1.0, 1000.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  std::vector<Outgoing> out = h.join("B", "b", 300);
  const uint32_t b = idOf(out, "B");
  const size_t d = h.core->parameters().size();
  for (uint64_t r = 0; r < 5; ++r) {
    size_t starts = 0;
    for (const auto& o : out) {
      if (!o.message.envelope.has_round_start()) continue;
      CAPTURE(r);
      CHECK(o.message.envelope.round_start().round() == r);
      CHECK(o.message.envelope.round_start().learning_rate() == 0.2 * std::pow(0.5, double(r / 2)));
      ++starts;
    }
    CHECK(starts == 2);
    h.core->onMessage("A", h.push(a, r, std::vector<float>(d, 0.5f)), 50, h.now);
    out = h.core->onMessage("B", h.push(b, r, std::vector<float>(d, 0.5f)), 50, h.now);
    REQUIRE(h.core->round() == r + 1);
  }
}

TEST_CASE("a negative predicted improvement is a report a tuner makes: the least harm") {
  Harness h;
  h.withTimers(1.0, 1000.0);
  const auto [a, b] = h.joinAB();
  const size_t d = h.core->parameters().size();
  auto m = h.push(a, 0, std::vector<float>(d, 0.5f));
  m.envelope.mutable_push()->set_level(1);
  m.envelope.mutable_push()->set_predicted_cost(3.0);
  m.envelope.mutable_push()->set_predicted_improvement(-0.125);
  h.core->onMessage("A", m, 50, h.now);
  h.core->onMessage("B", h.push(b, 0, std::vector<float>(d, 0.5f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  CHECK(h.core->badReports() == 0);
  checkReport(recordOf(*h.core, a), 1, 3.0, -0.125);
}

namespace {

// Pushes priced at 50 bytes plus 4 a coordinate (not measured), a model of d = 602 and
// `bytes_per_round` (0 = the budget as set).
void priceAt50Plus4(config::CoordinatorSettings& s, double bytes_per_round = 0.0) {
  s.model.features = 300;
  s.allocation.measure_push_bytes = false;
  s.allocation.budget.bytes_per_coordinate = 4.0;
  s.allocation.budget.bytes_per_push = 50.0;
  if (bytes_per_round > 0.0) s.allocation.budget.bytes_per_round = bytes_per_round;
}

// The caps of the round starts for `round` among the messages, by peer.
std::map<std::string, uint32_t> roundStartCaps(const std::vector<Outgoing>& out, uint64_t round) {
  std::map<std::string, uint32_t> caps;
  for (const auto& o : out) {
    if (o.message.envelope.has_round_start() && o.message.envelope.round_start().round() == round) {
      caps[o.peer] = o.message.envelope.round_start().cap();
    }
  }
  return caps;
}

void append(std::vector<Outgoing>& to, std::vector<Outgoing> more) {
  to.insert(to.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

// Workers a (100 samples) and b (300) train; c (`c_samples`) joins while round 0 is open. Returns
// the caps handed out for round 0 and for round 1, by peer.
std::pair<std::map<std::string, uint32_t>, std::map<std::string, uint32_t>> joinMidRound(
    Harness& h, uint64_t c_samples) {
  h.withTimers(1000.0, 1000.0);
  std::vector<Outgoing> round0 = h.join("A", "a", 100);
  append(round0, h.join("B", "b", 300));
  const uint32_t a = idOf(round0, "A"), b = idOf(round0, "B");
  std::vector<Outgoing> joined = h.join("C", "c", c_samples);
  const uint32_t c = idOf(joined, "C");
  append(round0, joined);
  auto caps0 = roundStartCaps(round0, 0);
  const size_t d = h.core->parameters().size();
  std::vector<Outgoing> round1 = h.core->onMessage("A", h.push(a, 0, ramp(d, 0.1f, 0.01f)), 50, 0);
  append(round1, h.core->onMessage("B", h.push(b, 0, ramp(d, 0.2f, 0.01f)), 50, 0));
  if (caps0.count("C")) {
    append(round1, h.core->onMessage("C", h.push(c, 0, ramp(d, 0.3f, 0.01f)), 50, 0));
  }
  // The round closes once everyone with a cap in it has pushed; it does not wait for a worker
  // that sits it out.
  CHECK(h.core->round() == 1);
  return {caps0, roundStartCaps(round1, 1)};
}

}  // namespace

TEST_CASE("a worker joining an open round under a byte budget gets what the round has left") {
  // Pushes priced at 50 bytes plus 4 a coordinate: the round's caps, the joiner's included,
  // stay within the budget, and the next round's plan covers all three.
  Harness h;
  priceAt50Plus4(h.settings);
  auto bytes = [](const std::map<std::string, uint32_t>& caps) {
    double sum = 0.0;
    for (const auto& [peer, cap] : caps) sum += 50.0 + 4.0 * cap;
    return sum;
  };
  SUBCASE("with room left, the joiner's cap is what the budget leaves") {
    // d = 602: a and b each send everything (2 * (50 + 4 * 602) = 4916 bytes), which leaves
    // 1084 bytes: 50 for c's push and 258 coordinates.
    h.settings.allocation.budget.bytes_per_round = 6000.0;
    const auto [caps0, caps1] = joinMidRound(h, 200);
    const size_t d = h.core->parameters().size();
    REQUIRE(d == 602);
    REQUIRE(caps0.size() == 3);
    CHECK(caps0.at("A") == d);
    CHECK(caps0.at("B") == d);
    CHECK(caps0.at("C") == 258);
    CHECK(bytes(caps0) <= 6000.0);
    REQUIRE(caps1.size() == 3);
    CHECK(bytes(caps1) <= 6000.0);
    // Three even caps of the next round: (6000 - 3 * 50) / (3 * 4) = 487.5 each.
    for (const auto& [peer, cap] : caps1) CHECK(cap >= 487);
  }
  SUBCASE("with the budget spent, the joiner sits the round out and starts with the next") {
    // a and b's caps spend 2 * 50 + 4 * 2 * 487 = 3996 of 4000 bytes: not one coordinate left.
    h.settings.allocation.budget.bytes_per_round = 4000.0;
    const auto [caps0, caps1] = joinMidRound(h, 200);
    CHECK(caps0.size() == 2);
    CHECK(caps0.count("C") == 0);
    CHECK(bytes(caps0) <= 4000.0);
    REQUIRE(caps1.size() == 3);
    CHECK(bytes(caps1) <= 4000.0);
    CHECK(bytes(caps1) > 4000.0 - 3 * 4.0);
  }
}

TEST_CASE("a worker joining an open round under a mean-ratio budget keeps the round's total") {
  // dagc-r with mean ratio 10% of d = 602: three members may send floor(0.3 * 602) = 180
  // coordinates a round. c joins with 60% of the data; a and b keep the caps planned for two.
  Harness h;
  h.settings.model.features = 300;
  h.settings.allocation.method = tern::allocation::Method::kDagcR;
  h.settings.allocation.budget.mean_ratio = 0.1;
  const auto [caps0, caps1] = joinMidRound(h, 600);
  auto total = [](const std::map<std::string, uint32_t>& caps) {
    uint64_t sum = 0;
    for (const auto& [peer, cap] : caps) sum += cap;
    return sum;
  };
  REQUIRE(caps0.size() == 3);
  CHECK(total(caps0) <= 180);
  CHECK(caps0.at("C") >= 1);
  REQUIRE(caps1.size() == 3);
  CHECK(total(caps1) <= 180);
  CHECK(caps1.at("C") > caps1.at("B"));
}

TEST_CASE("a worker joining an open round under a link-seconds budget gets the seconds it left") {
  // cost-aware, pushes priced at 50 bytes plus 4 a coordinate, d = 6002, every link 1 ms per
  // 1448-byte packet: a coordinate takes 4 / 1448 ms of the round's budget. a (100 samples) and
  // b (300) push two rounds with their fitted links; c (200, no fit yet: the median link) joins
  // while round 2 is open. Before, c took its planned cap on top of the members' whole budget.
  Harness h;
  priceAt50Plus4(h.settings);
  h.settings.model.features = 3000;
  h.settings.allocation.method = tern::allocation::Method::kCostAware;
  h.settings.allocation.reallocate_every = 1;
  const double per_coordinate = 0.001 * 4.0 / 1448.0;
  auto seconds = [&](const std::map<std::string, uint32_t>& caps) {
    double sum = 0.0;
    for (const auto& [peer, cap] : caps) sum += per_coordinate * cap;
    return sum;
  };
  auto run = [&](double budget) {
    h.settings.allocation.budget.seconds_per_round = budget;
    h.withTimers(1000.0, 1000.0);
    const auto [a, b] = h.joinAB();
    const size_t d = h.core->parameters().size();
    REQUIRE(d == 6002);
    auto withLink = [&](uint32_t id, uint64_t round) {
      auto m = h.push(id, round, ramp(d, 0.1f * float(id + 1), 0.001f));
      auto* l = m.envelope.mutable_push()->mutable_link();
      l->set_a_seconds(0.002);
      l->set_b_seconds_per_packet(0.001);
      l->set_packet_bytes(1448);
      l->set_samples(20);
      l->set_r2(0.99);
      return m;
    };
    std::vector<Outgoing> round2;
    for (uint64_t r = 0; r < 2; ++r) {
      h.core->onMessage("A", withLink(a, r), 50, h.now);
      round2 = h.core->onMessage("B", withLink(b, r), 50, h.now);
      REQUIRE(h.core->round() == r + 1);
    }
    append(round2, h.join("C", "c", 200));
    return roundStartCaps(round2, 2);
  };
  SUBCASE("with seconds left, the joiner's cap is what they buy") {
    // 40 ms buy 14,480 coordinates: a and b send all 6002 each, c the other 2476.
    const auto caps = run(0.04);
    REQUIRE(caps.size() == 3);
    CHECK(caps.at("A") == 6002);
    CHECK(caps.at("B") == 6002);
    CHECK(caps.at("C") >= 2470);
    CHECK(seconds(caps) <= 0.04 * (1 + 1e-9));
  }
  SUBCASE("with the seconds spent, the joiner sits the round out") {
    // 10 ms buy 3620 coordinates, all of them planned for a and b.
    const auto caps = run(0.01);
    REQUIRE(caps.size() == 2);
    CHECK(caps.count("C") == 0);
    CHECK(seconds(caps) <= 0.01 * (1 + 1e-9));
    CHECK(seconds(caps) > 0.01 - 10 * per_coordinate);
  }
}

TEST_CASE("a worker joining a round its members left takes it, whatever the budget") {
  // d = 8 and a mean ratio of 5%: the round's budget is 0.4 coordinates, and every plan gives
  // each worker the one coordinate it must. a starts round 0 alone and leaves before pushing; b
  // joins. Before, b sat the round out (nothing left of 0.4) and nobody was left to close it.
  Harness h;
  h.settings.min_workers = 1;
  h.settings.allocation.budget.mean_ratio = 0.05;
  h.withTimers(1.0, 1000.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  (void)a;
  h.core->onMessage("A", h.leave(), 10, h.now);
  std::vector<Outgoing> out = h.join("B", "b", 100);
  const uint32_t b = idOf(out, "B");
  const auto caps = roundStartCaps(out, 0);
  REQUIRE(caps.count("B") == 1);
  CHECK(caps.at("B") == 1);
  const size_t d = h.core->parameters().size();
  REQUIRE(d == 8);
  h.core->onMessage("B", h.push(b, 0, ramp(d, 0.1f, 0.01f)), 50, h.now);
  CHECK(h.core->round() == 1);
}

namespace {

// Pushes priced at 50 bytes plus 4 a coordinate, 4000 bytes a round, d = 602: a (100 samples)
// and b (300) are handed 487 coordinates each for round 0 (3996 bytes), so c, joining while
// round 0 is open, sits it out.
struct SittingOut {
  Harness h;
  uint32_t a = 0, b = 0, c = 0;
  size_t d = 0;
  std::vector<Outgoing> c_joined;

  explicit SittingOut(double quorum_share = 1.0, uint64_t c_samples = 200) {
    priceAt50Plus4(h.settings, 4000.0);
    h.settings.quorum_share = quorum_share;
    h.withTimers(1.0, 1000.0);
    std::tie(a, b) = h.joinAB();
    c_joined = h.join("C", "c", c_samples);
    c = idOf(c_joined, "C");
    d = h.core->parameters().size();
  }
  static double bytes(uint32_t cap) { return 50.0 + 4.0 * cap; }
};

}  // namespace

TEST_CASE("a worker sitting out a round is refused a push for it, not counted late") {
  SittingOut s;
  REQUIRE(roundStartCaps(s.c_joined, 0).empty());
  const auto out = s.h.core->onMessage("C", s.h.push(s.c, 0, ramp(s.d, 0.3f, 0.01f)), 50, s.h.now);
  REQUIRE(hasError(out, wire::Error::BAD_ROUND));
  CHECK(s.h.core->rejections().at("not_in_round") == 1);
  CHECK(s.h.core->round() == 0);
  s.h.core->onMessage("A", s.h.push(s.a, 0, ramp(s.d, 0.1f, 0.01f)), 50, s.h.now);
  s.h.core->onMessage("B", s.h.push(s.b, 0, ramp(s.d, 0.2f, 0.01f)), 50, s.h.now);
  REQUIRE(s.h.core->round() == 1);
  CHECK(s.h.core->lastRecord().late_pushes == 0);
  CHECK(s.h.core->lastRecord().participants == 2);
}

TEST_CASE("the caps of members that leave without pushing go to a worker sitting the round out") {
  SittingOut s;
  SUBCASE("one member leaves: c gets a's cap's worth, b keeps its own") {
    const auto out = s.h.core->onMessage("A", s.h.leave(), 10, s.h.now);
    const auto caps = roundStartCaps(out, 0);
    REQUIRE(caps.count("C") == 1);
    // b's 487 (1998 bytes) stays spent: c may spend the other 2002, 50 for its push.
    CHECK(SittingOut::bytes(487) + SittingOut::bytes(caps.at("C")) <= 4000.0);
    CHECK(caps.at("C") >= 487);
    s.h.core->onMessage("B", s.h.push(s.b, 0, ramp(s.d, 0.2f, 0.01f)), 50, s.h.now);
    CHECK(s.h.core->round() == 0);  // c, now a member, is waited for
    s.h.core->onMessage("C", s.h.push(s.c, 0, ramp(s.d, 0.3f, 0.01f)), 50, s.h.now);
    CHECK(s.h.core->round() == 1);
  }
  SUBCASE("every member goes silent: c is asked once they are marked gone, and the round closes") {
    // Before: c heartbeat through every deadline and was never asked; the round never closed.
    s.h.withTimers(1.0, 5.0);
    std::tie(s.a, s.b) = s.h.joinAB();
    s.c = idOf(s.h.join("C", "c", 200), "C");
    const Message hb = s.h.heartbeat(s.c);
    std::map<std::string, uint32_t> caps;
    for (int t = 0; t < 12 && caps.empty(); ++t) {
      s.h.now += 1.0;
      s.h.core->onMessage("C", hb, 10, s.h.now);
      caps = roundStartCaps(s.h.core->onTick(), 0);
    }
    REQUIRE(caps.count("C") == 1);
    CHECK(SittingOut::bytes(caps.at("C")) <= 4000.0);
    s.h.core->onMessage("C", s.h.push(s.c, 0, ramp(s.d, 0.3f, 0.01f)), 50, s.h.now);
    CHECK(s.h.core->round() == 1);
  }
}

TEST_CASE("a worker sitting out a round holds no part of its quorum") {
  // Quorum 0.5. c (600 samples) sits out; of the round's members b (300) pushed and a (100)
  // straggles: b holds 75% of the members' data, so the round closes at its deadline, though b
  // holds only 30% of everyone's.
  SittingOut s(0.5, 600);
  s.h.core->onMessage("B", s.h.push(s.b, 0, ramp(s.d, 0.2f, 0.01f)), 50, s.h.now);
  CHECK(s.h.core->round() == 0);
  s.h.now += 1.5;
  s.h.core->onTick();
  CHECK(s.h.core->round() == 1);
}

TEST_CASE("a round restarted after every worker went keeps the budget its earlier push spent") {
  // Quorum 0.5: a pushes its 487 coordinates (1998 bytes), then a and b fall silent and are
  // marked gone; the round, short of its quorum, waits. c joins and restarts it alone: a's push
  // stays in the round, so c may spend 2002 bytes, not the 2458 of all 602 coordinates.
  Harness h;
  priceAt50Plus4(h.settings, 4000.0);
  h.settings.quorum_share = 0.5;
  h.withTimers(1.0, 5.0);
  const auto [a, b] = h.joinAB();
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, 0, ramp(d, 0.1f, 0.01f)), 50, h.now);
  h.now += 6.0;
  h.core->onTick();
  REQUIRE(h.core->aliveWorkers() == 0);
  REQUIRE(h.core->round() == 0);
  const auto caps = roundStartCaps(h.join("C", "c", 200), 0);
  REQUIRE(caps.count("C") == 1);
  CHECK(50.0 + 4.0 * 487 + 50.0 + 4.0 * caps.at("C") <= 4000.0);
  CHECK(caps.at("C") >= 480);
}

TEST_CASE("a worker restarted under its name is priced afresh, a reconnect keeps its price") {
  // a sends top-k pushes (index and value: dearer per coordinate than b's dense fp32). After a
  // leaves and joins again, a reconnect of the same process (same instance) is still priced at
  // a's own measure, a new process (another instance, maybe another compressor) at the mean of
  // all pushes: with a's dearer price the budget buys fewer coordinates.
  auto capAfterRejoin = [](uint64_t rejoin_instance) {
    Harness h;
    h.settings.model.features = 300;
    h.settings.min_workers = 1;
    // Less than b's whole gradient: b alone spends all of it, so a re-joining sits round 2 out.
    h.settings.allocation.budget.bytes_per_round = 2000.0;
    h.withTimers(1000.0, 1000.0);
    const uint32_t a = idOf(h.join("A", "a", 100, 5), "A");
    const uint32_t b = idOf(h.join("B", "b", 100), "B");
    const size_t d = h.core->parameters().size();
    Rng rng(3);
    auto topk = [&](uint64_t round) {
      Message m = h.push(a, round, ramp(d, 0.1f, 0.01f));
      m.payload =
          compression::makeCompressor({"topk"})->compress(ramp(d, 0.1f, 0.01f), 40, rng).bytes;
      return m;
    };
    h.core->onMessage("A", topk(0), 50, h.now);
    h.core->onMessage("B", h.push(b, 0, ramp(d, 0.2f, 0.01f)), 50, h.now);
    REQUIRE(h.core->round() == 1);
    h.core->onMessage("A", h.leave(), 10, h.now);
    h.core->onMessage("B", h.push(b, 1, ramp(d, 0.2f, 0.01f)), 50, h.now);
    REQUIRE(h.core->round() == 2);
    h.join("A", "a", 100, rejoin_instance);
    const auto out = h.core->onMessage("B", h.push(b, 2, ramp(d, 0.2f, 0.01f)), 50, h.now);
    REQUIRE(h.core->round() == 3);
    const auto caps = roundStartCaps(out, 3);
    REQUIRE(caps.count("A") == 1);
    return caps.at("A");
  };
  CHECK(capAfterRejoin(6) > capAfterRejoin(5));
}

TEST_CASE("a restarted coordinator keeps what each worker's pushes cost, for the same process") {
  // a sends top-k pushes (dearer per coordinate than b's dense fp32) under a byte budget. After
  // two rounds the coordinator restarts from its checkpoint: a re-joining from the same process
  // gets the cap the original planned for round 2 (its price kept), a new process under a's name
  // one priced afresh at the mean of all pushes (cheaper: more coordinates). Before, every
  // restart forgot the prices and the first rounds after it overspent the budget.
  Harness h;
  h.settings.model.features = 300;
  h.settings.allocation.budget.bytes_per_round = 2000.0;
  h.withTimers(1000.0, 1000.0);
  const uint32_t a = idOf(h.join("A", "a", 100, 5), "A");
  const uint32_t b = idOf(h.join("B", "b", 100, 9), "B");
  const size_t d = h.core->parameters().size();
  Rng rng(3);
  std::vector<Outgoing> last;
  for (uint64_t r = 0; r < 2; ++r) {
    Message m = h.push(a, r, ramp(d, 0.1f, 0.01f));
    m.payload =
        compression::makeCompressor({"topk"})->compress(ramp(d, 0.1f, 0.01f), 40, rng).bytes;
    h.core->onMessage("A", m, 50, h.now);
    last = h.core->onMessage("B", h.push(b, r, ramp(d, 0.2f, 0.01f)), 50, h.now);
    REQUIRE(h.core->round() == r + 1);
  }
  const auto original = roundStartCaps(last, 2);
  REQUIRE(original.count("A") == 1);
  REQUIRE(original.count("B") == 1);
  const std::string bytes = h.core->checkpoint();

  auto capsAfterRestart = [&](uint64_t a_instance) {
    auto restored = testing::DrivenCoordinator::restore(
        h.settings, ml::makeModel(h.settings.model), nullptr, 43, [&h] { return h.now; }, bytes);
    auto join = [&](const std::string& peer, const std::string& name, uint64_t instance) {
      Message m;
      m.envelope = makeEnvelope();
      m.envelope.mutable_join()->set_worker_name(name);
      m.envelope.mutable_join()->set_sample_count(100);
      m.envelope.mutable_join()->set_instance(instance);
      return restored->onMessage(peer, m, 10, h.now);
    };
    std::vector<Outgoing> out = join("A", "a", a_instance);
    append(out, join("B", "b", 9));
    return roundStartCaps(out, 2);
  };
  const auto same = capsAfterRestart(5);
  REQUIRE(same.count("A") == 1);
  CHECK(same.at("A") == original.at("A"));
  CHECK(same.at("B") == original.at("B"));
  const auto other = capsAfterRestart(6);
  REQUIRE(other.count("A") == 1);
  CHECK(other.at("A") > original.at("A"));
}

TEST_CASE("a checkpoint holding an impossible push price is refused with a reason") {
  Harness h;
  const auto [a, b] = h.joinAB();
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, 0, ramp(d, 0.1f, 0.01f)), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, ramp(d, 0.2f, 0.01f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  wire::Checkpoint c;
  REQUIRE(c.ParseFromString(h.core->checkpoint()));
  REQUIRE(c.has_push_price());
  REQUIRE(c.workers_size() == 2);
  REQUIRE(c.workers(0).has_push_price());
  auto restoreFrom = [&](const wire::Checkpoint& damaged) {
    testing::DrivenCoordinator::restore(
        h.settings, ml::makeModel(h.settings.model), nullptr, 43, [&h] { return h.now; },
        damaged.SerializeAsString());
  };
  CHECK_NOTHROW(restoreFrom(c));
  for (double bad : {std::nan(""), -1.0, 0.0, double(INFINITY)}) {
    CAPTURE(bad);
    wire::Checkpoint per_worker = c;
    per_worker.mutable_workers(0)->mutable_push_price()->set_bytes_per_coordinate(bad);
    CHECK_THROWS_WITH_AS(restoreFrom(per_worker), doctest::Contains("invalid push price"),
                         std::runtime_error);
    wire::Checkpoint mean = c;
    mean.mutable_push_price()->set_fixed_bytes(bad == 0.0 ? -0.5 : bad);
    CHECK_THROWS_WITH_AS(restoreFrom(mean), doctest::Contains("invalid push price"),
                         std::runtime_error);
  }
}

TEST_CASE(
    "the welcome says the largest message part and the round deadline the coordinator keeps") {
  Harness h;
  h.settings.max_message_bytes = 5000;
  h.withTimers(7.5, 10.0);
  const auto out = h.join("A", "a", 100);
  bool said = false;
  for (const auto& o : out) {
    if (o.message.envelope.has_welcome()) {
      const auto& w = o.message.envelope.welcome();
      said = w.max_message_bytes() == 5000 && w.round_deadline_seconds() == 7.5;
    }
  }
  CHECK(said);
}

TEST_CASE("a round start says how much of the round's deadline is left") {
  Harness h;
  h.settings.min_workers = 1;
  h.withTimers(8.0, 100.0);
  auto left = [](const std::vector<Outgoing>& out) {
    for (const auto& o : out)
      if (o.message.envelope.has_round_start())
        return o.message.envelope.round_start().deadline_seconds_left();
    return -1.0;
  };
  // The round starts as the first worker joins: the whole deadline.
  CHECK(left(h.join("A", "a", 100)) == doctest::Approx(8.0));
  // A worker admitted 3 s into the running round has what is left of it.
  h.now += 3.0;
  CHECK(left(h.join("B", "b", 100)) == doctest::Approx(5.0));
}

TEST_CASE("a join is admitted under any name a worker's configuration accepts, and no longer one") {
  Harness h;
  CHECK(hasError(h.join("A", "", 100), wire::Error::MALFORMED));
  CHECK(hasError(h.join("A", std::string(config::kMaxWorkerNameBytes + 1, 'a'), 100),
                 wire::Error::MALFORMED));
  CHECK(h.core->rejections().at("bad_join") == 2);
  idOf(h.join("A", std::string(config::kMaxWorkerNameBytes, 'a'), 100), "A");
  CHECK(config::workerNameProblem(std::string(config::kMaxWorkerNameBytes, 'a')).empty());
  CHECK_FALSE(config::workerNameProblem(std::string(config::kMaxWorkerNameBytes + 1, 'a')).empty());
  CHECK_FALSE(config::workerNameProblem("").empty());
  // A name goes into the coordinator's logs and status: no line breaks or terminal escapes.
  CHECK(hasError(h.join("B", "pi\n[2026-01-01 00:00:00] [error] forged", 100),
                 wire::Error::MALFORMED));
  CHECK(hasError(h.join("C", "pi\x1b[2J", 100), wire::Error::MALFORMED));
  CHECK(hasError(h.join("D",
                        "pi\xc2\x9b"
                        "2J",
                        100),
                 wire::Error::MALFORMED));                              // C1 CSI
  CHECK(hasError(h.join("E", "pi\xff", 100), wire::Error::MALFORMED));  // not UTF-8
  CHECK(h.core->rejections().at("bad_join") == 6);
  CHECK(tern::printable("a\xc3\xbc\xff\xc2\x9b\nz") == "a\xc3\xbc\\xff\\xc2\\x9b\\x0az");
  // Cut between characters, never inside one.
  CHECK(tern::printable("\xc3\xbc\xc3\xbc\xc3\xbc", 5) == "\xc3\xbc\xc3\xbc...");
  CHECK_FALSE(config::workerNameProblem("pi\t3").empty());
  CHECK(config::workerNameProblem("pi-3 (kitchen, ünïcode)").empty());
}

TEST_CASE("a finished coordinator knows when every worker told to finish has answered") {
  Harness h;
  h.settings.max_rounds = 1;
  h.withTimers(100.0, 100.0);
  CHECK(h.core->finishAcknowledged());  // nobody told anything yet
  // A and B say they answer a Finish; C is of an older tern that does not, and is not waited for.
  const uint32_t a = h.joinAnsweringFinish("A", "a"), b = h.joinAnsweringFinish("B", "b");
  const uint32_t c = h.joinAnsweringFinish("C", "c", false);
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, 0, ramp(d, 1.0f, 1.0f)), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, ramp(d, 0.0f, 1.0f)), 50, h.now);
  const auto out = h.core->onMessage("C", h.push(c, 0, ramp(d, 2.0f, 1.0f)), 50, h.now);
  REQUIRE(h.core->finished());
  CHECK(std::count_if(out.begin(), out.end(),
                      [](const Outgoing& o) { return o.message.envelope.has_finish(); }) == 3);
  CHECK_FALSE(h.core->finishAcknowledged());
  CHECK(h.core->finishUnacknowledged() == 2);
  const uint64_t rejected = h.core->rejectedTotal();
  // A Leave of another session, or from a peer that is no worker, does not count as an answer.
  Message stale = h.leave();
  stale.envelope.mutable_leave()->set_session(h.session + 1);
  CHECK(hasError(h.core->onMessage("A", stale, 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK(hasError(h.core->onMessage("X", h.leave(), 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK(h.core->rejectedTotal() == rejected + 1);  // only the stranger's is at fault
  CHECK(h.core->finishUnacknowledged() == 2);
  // A heartbeat that crossed the Finish is answered, not counted: the run's record is closed.
  const Message hb = h.heartbeat(b);
  CHECK(hasError(h.core->onMessage("B", hb, 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK(h.core->rejectedTotal() == rejected + 1);
  CHECK(h.core->onMessage("A", h.leave(), 10, h.now).empty());
  CHECK(h.core->finishUnacknowledged() == 1);
  // A second Leave of A's is answered like any message after the end, and counts for nothing.
  CHECK(hasError(h.core->onMessage("A", h.leave(), 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK_FALSE(h.core->finishAcknowledged());
  CHECK(h.core->onMessage("B", h.leave(), 10, h.now).empty());
  CHECK(h.core->finishAcknowledged());
  CHECK(h.core->rejectedTotal() == rejected + 1);
}

TEST_CASE("a worker whose push takes long on its link is not called silent while it sends") {
  // The heartbeats of a worker on a slow uplink queue behind its push: while the push for the
  // open round is awaited, its patience is twice the push's time on its fitted link (here 1 + 10
  // s a packet, one packet: 22 s) where that is longer than worker_patience_seconds (5 s). While
  // no link is fitted, twice what its last push took to arrive after its round start (here 6 s:
  // 12 s). (Before its first push, the round's deadline: below, with a link in the join.)
  for (const bool fitted : {true, false}) {
    CAPTURE(fitted);
    Harness h;
    h.withTimers(30.0, 5.0);
    const auto [a, b] = h.joinAB();
    const size_t d = h.core->parameters().size();
    auto pushWithLink = [&](uint32_t id, uint64_t round) {
      Message m = h.push(id, round, ramp(d, 1.0f, 1.0f));
      if (fitted) {
        auto* link = m.envelope.mutable_push()->mutable_link();
        link->set_a_seconds(1.0);
        link->set_b_seconds_per_packet(10.0);
        link->set_packet_bytes(1448);
        link->set_samples(8);
      }
      return m;
    };
    // Round 0's pushes arrive 6 s after its start.
    h.now += 6.0;
    h.core->onMessage("A", pushWithLink(a, 0), 50, h.now);
    h.core->onMessage("B", pushWithLink(b, 0), 50, h.now);
    REQUIRE(h.core->round() == 1);
    const double opened = h.now;
    // A pushes at once and keeps in touch; B's push is on its way.
    h.core->onMessage("A", pushWithLink(a, 1), 50, h.now);
    const double gone_at = fitted ? 22.0 : 12.0;
    for (double t : {4.0, 8.0, 11.9, 12.0, 16.0, 20.0, 21.9, 22.0}) {
      h.now = opened + t;
      h.core->onMessage("A", h.heartbeat(a), 10, h.now);
      h.core->onTick();
      CAPTURE(t);
      CHECK(h.core->aliveWorkers() == (t < gone_at ? 2u : 1u));
    }
  }
  // Not awaited (its push is in), the patience is worker_patience_seconds, fitted or not.
  Harness h;
  h.withTimers(30.0, 5.0);
  const auto [a, b] = h.joinAB();
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, 0, ramp(d, 1.0f, 1.0f)), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, ramp(d, 1.0f, 1.0f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  const double opened = h.now;
  // B's push is in, then B falls silent; A keeps in touch while its push is on its way.
  h.core->onMessage("B", h.push(b, 1, ramp(d, 1.0f, 1.0f)), 50, h.now);
  h.now = opened + 4.9;
  h.core->onMessage("A", h.heartbeat(a), 10, h.now);
  h.core->onTick();
  CHECK(h.core->aliveWorkers() == 2);
  h.now = opened + 5.0;
  h.core->onMessage("A", h.heartbeat(a), 10, h.now);
  h.core->onTick();
  CHECK(h.core->aliveWorkers() == 1);
}

TEST_CASE("a push from no known worker is refused naming its round, so that the sender times it") {
  Harness h;
  const uint32_t a = h.joinAB().first;
  const size_t d = h.core->parameters().size();
  Message push = h.push(a, 3, ramp(d, 1.0f, 1.0f));
  push.envelope.mutable_push()->set_session(h.session + 1);  // a session this core never had
  for (const bool probe : {false, true}) {
    CAPTURE(probe);
    push.envelope.mutable_push()->set_probe(probe);
    const auto out = h.core->onMessage("A", push, 50, h.now);
    REQUIRE(out.size() == 1);
    REQUIRE(hasError(out, wire::Error::UNKNOWN_SESSION));
    const auto& e = out[0].message.envelope.error();
    CHECK(e.round() == 3);
    CHECK(e.about_push() == !probe);  // a probe's refusal takes nothing back
    CHECK(e.session() == h.session);  // its own: the sender tells a restart from being forgotten
  }
}

TEST_CASE("a link model in a join prices the first push's patience, and a bad one is dropped") {
  // B re-joins (a worker that measured its link before): 1 + 10 s a packet, one packet, so its
  // first push may take 22 s; without a link in the join (or with only an earlier process's)
  // it has the round's deadline (30 s).
  auto fitted = [] {
    wire::LinkModel link;
    link.set_a_seconds(1.0);
    link.set_b_seconds_per_packet(10.0);
    link.set_packet_bytes(1448);
    link.set_samples(8);
    return link;
  };
  struct Case {
    const char* name;
    std::optional<wire::LinkModel> link;
    bool new_process;  // another process under B's name joins next, saying no link
    double gone_at;
    uint64_t dropped;
  };
  wire::LinkModel bad = fitted();
  bad.set_b_seconds_per_packet(-1.0);
  for (const Case& c :
       {Case{"fitted", fitted(), false, 22.0, 0}, Case{"none", std::nullopt, false, 30.0, 0},
        Case{"not a link", bad, false, 30.0, 1},
        Case{"the old process's link", fitted(), true, 30.0, 0}}) {
    CAPTURE(c.name);
    Harness h;
    h.withTimers(30.0, 5.0);
    const uint32_t a = idOf(h.join("A", "a", 100), "A");
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_join()->set_worker_name("b");
    m.envelope.mutable_join()->set_sample_count(300);
    m.envelope.mutable_join()->set_instance(1);
    if (c.link) *m.envelope.mutable_join()->mutable_link() = *c.link;
    idOf(h.core->onMessage("B", m, 10, h.now), "B");
    if (c.new_process) {
      m.envelope.mutable_join()->set_instance(2);
      m.envelope.mutable_join()->clear_link();
      idOf(h.core->onMessage("B", m, 10, h.now), "B");
    }
    CHECK(h.core->rejectedTotal() == c.dropped);
    const size_t d = h.core->parameters().size();
    h.core->onMessage("A", h.push(a, 0, ramp(d, 1.0f, 1.0f)), 50, h.now);
    const double opened = h.now;
    for (double t : {4.0, 21.9, 22.0, 29.9, 30.0}) {
      h.now = opened + t;
      h.core->onMessage("A", h.heartbeat(a), 10, h.now);
      h.core->onTick();
      CAPTURE(t);
      CHECK(h.core->aliveWorkers() == (t < c.gone_at ? 2u : 1u));
    }
  }
}

TEST_CASE("a worker marked gone is told that training finished too, without the last step") {
  Harness h;
  h.settings.max_rounds = 1;
  h.withTimers(30.0, 5.0);
  const uint32_t a = h.joinAnsweringFinish("A", "a");
  h.joinAnsweringFinish("B", "b");
  // B falls silent with its push awaited (its first: the round's deadline) and is marked gone.
  h.now = 29.0;
  h.core->onMessage("A", h.heartbeat(a), 10, h.now);
  h.core->onTick();
  REQUIRE(h.core->aliveWorkers() == 2);
  h.now = 30.0;
  h.core->onMessage("A", h.heartbeat(a), 10, h.now);
  h.core->onTick();
  REQUIRE(h.core->aliveWorkers() == 1);
  REQUIRE_FALSE(h.core->finished());
  const size_t d = h.core->parameters().size();
  const auto out = h.core->onMessage("A", h.push(a, 0, ramp(d, 1.0f, 1.0f)), 50, h.now);
  REQUIRE(h.core->finished());
  std::map<std::string, const Message*> finish;
  for (const auto& o : out)
    if (o.message.envelope.has_finish()) finish[o.peer] = &o.message;
  REQUIRE(finish.size() == 2);
  CHECK_FALSE(finish.at("A")->payload.empty());  // the last step
  CHECK(finish.at("B")->payload.empty());        // its replica is not the model's
  // Only A is waited for; B's answer, should it come, is answered without counting against it.
  CHECK(h.core->finishUnacknowledged() == 1);
  const uint64_t rejected = h.core->rejectedTotal();
  CHECK(hasError(h.core->onMessage("B", h.leave(), 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK(h.core->rejectedTotal() == rejected);
  CHECK(h.core->finishUnacknowledged() == 1);
  CHECK(h.core->onMessage("A", h.leave(), 10, h.now).empty());
  CHECK(h.core->finishAcknowledged());
}
