// The coordinator core's timers: a round closes at its deadline, the welcome and round starts
// say how much of it is left, and a worker is marked gone after its patience, stretched to the
// time its push takes on its link while that push is awaited.
#include <doctest/doctest.h>

#include <optional>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

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

TEST_CASE("the welcome says whether caps are planned by link time beyond the caps in force") {
  // Only cost-aware under a link-seconds budget, an upload deadline or a round overhead reads
  // the links past what a push at the cap takes; a volume budget (the shipped one) does not.
  struct Case {
    allocation::Method method;
    double seconds, deadline, overhead;
    bool plans;
  };
  const std::vector<Case> cases = {{allocation::Method::kCostAware, 0, 0, 0, false},
                                   {allocation::Method::kCostAware, 0.05, 0, 0, true},
                                   {allocation::Method::kCostAware, 0, 0.2, 0, true},
                                   {allocation::Method::kCostAware, 0, 0, 0.01, true},
                                   {allocation::Method::kDagcR, 0.05, 0.2, 0.01, false},
                                   {allocation::Method::kUniform, 0.05, 0, 0, false}};
  for (const auto& c : cases) {
    CAPTURE(allocation::methodName(c.method));
    CAPTURE(c.seconds);
    CAPTURE(c.deadline);
    CAPTURE(c.overhead);
    Harness h;
    h.settings.allocation.method = c.method;
    h.settings.allocation.budget.seconds_per_round = c.seconds;
    h.settings.allocation.budget.deadline_seconds = c.deadline;
    h.settings.allocation.budget.round_overhead_seconds = c.overhead;
    h.withTimers(5.0, 10.0);
    std::optional<bool> said;
    for (const auto& o : h.join("A", "a", 100))
      if (o.message.envelope.has_welcome())
        said = o.message.envelope.welcome().plans_by_link_time();
    REQUIRE(said.has_value());
    CHECK(*said == c.plans);
  }
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
