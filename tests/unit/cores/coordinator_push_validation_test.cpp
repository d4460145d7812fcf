// The coordinator core against bad pushes: every rejection is answered with a coded error,
// counted by reason, and leaves the model untouched; a push's link model and tuner report are
// checked apart from its gradient, an unusable one dropped and counted while the gradient counts.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

namespace {

// The tuner report recorded for a worker: the level it sent and the two predictions.
void checkReport(const server::WorkerRecord& w, uint32_t level, double cost, double improvement,
                 double step = 0.0) {
  CHECK(w.level == level);
  CHECK(w.predicted_cost == cost);
  CHECK(w.predicted_improvement == improvement);
  CHECK(w.predicted_step == step);
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
  uint8_t* bytes = m.payload.mutableData();
  for (size_t i = 0; i + 4 <= m.payload.size(); ++i) {
    if (std::memcmp(bytes + i, &two_and_half, 4) == 0) {
      std::memcpy(bytes + i, &nan, 4);
      ++patched;
    }
  }
  REQUIRE(patched == 1);
  CHECK(hasError(h.core->onMessage("A", m, 50, h.now), wire::Error::BAD_PAYLOAD));
  // Truncated payload.
  m = h.push(a, 0, std::vector<float>(d, 1.0f));
  m.payload = std::vector<uint8_t>(m.payload.begin(), m.payload.end() - 3);
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
