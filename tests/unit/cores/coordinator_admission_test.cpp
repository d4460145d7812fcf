// The coordinator core admitting a worker into an open round: the joiner gets what the round's
// budget (bytes, mean ratio or link seconds) has left, or sits the round out, refused a push
// for it and holding no part of its quorum, until members that leave free their caps.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

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
