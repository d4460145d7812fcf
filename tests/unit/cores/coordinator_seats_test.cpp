// Who holds a worker's name and seat: a join that does not say its process never takes a live
// worker's name, a connection holds one name and joins at a bounded rate, and a member that
// never pushed neither keeps its seat long nor displaces a worker that did.
#include <doctest/doctest.h>

#include <string>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

namespace {

// Both workers of joinAB push in the open round; true when it closed.
bool pushBoth(Harness& h, uint32_t a, uint32_t b) {
  const uint64_t r = h.core->round();
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, r, std::vector<float>(d, 0.1f)), 50, h.now);
  h.core->onMessage("B", h.push(b, r, std::vector<float>(d, 0.1f)), 50, h.now);
  if (h.core->round() == r) {  // a member that does not push holds the round to its deadline
    h.now += h.settings.round_deadline_seconds + 0.01;
    h.core->onTick();
  }
  return h.core->round() == r + 1;
}

}  // namespace

TEST_CASE("a join without an instance never takes the name of a live worker that gave one") {
  Harness h;
  h.withTimers(2.0, 10.0);
  const uint32_t a = idOf(h.join("A", "pi", 100, 7), "A");
  // Another connection, no instance (the bypass): refused, counted, and the holder keeps all.
  CHECK(hasError(h.join("X", "pi", 100, 0), wire::Error::NAME_TAKEN));
  CHECK(h.core->rejections().at("name_taken") == 1);
  // Its own connection again without an instance: its re-join, and it keeps its instance, so a
  // later instance-less join elsewhere is still refused.
  CHECK(idOf(h.join("A", "pi", 100, 0), "A") == a);
  CHECK(hasError(h.join("Y", "pi", 100, 0), wire::Error::NAME_TAKEN));
  // The holder's process on a new connection (same instance) keeps its name and id.
  CHECK(idOf(h.join("A2", "pi", 100, 7), "A2") == a);
  // A holder that gave no instance is not re-joined by name from elsewhere while it lives.
  const uint32_t q = idOf(h.join("Q", "qi", 100, 0), "Q");
  CHECK(hasError(h.join("Z", "qi", 100, 0), wire::Error::NAME_TAKEN));
  h.now += 10.5;  // both marked gone: the names are free
  h.core->onTick();
  CHECK(idOf(h.join("Z", "qi", 100, 0), "Z") == q);
}

TEST_CASE("1,000 joins under made-up names on one connection take one seat and stop no round") {
  Harness h;
  h.settings.max_workers = 4;
  h.withTimers(2.0, 10.0);
  const auto [a, b] = h.joinAB();
  REQUIRE(pushBoth(h, a, b));
  for (int i = 0; i < 1000; ++i) h.join("E", "made-up-" + std::to_string(i), 100);
  // One name for the connection, and the rest refused and counted.
  CHECK(h.core->rejections().at("join_rate_connection") +
            h.core->rejections().at("one_name_per_connection") ==
        999);
  CHECK(h.core->aliveWorkers() == 3);
  // The real fleet's rounds go on, and a new real worker still finds a seat.
  const uint32_t c = idOf(h.join("C", "c", 100), "C");
  CHECK(c != a);
  for (int i = 0; i < 5; ++i) CHECK(pushBoth(h, a, b));
  CHECK(h.core->lastRecord().workers.size() == 4);
}

TEST_CASE("a member that never pushed gives its seat to a newcomer, one that pushed never does") {
  Harness h;
  h.settings.max_workers = 4;
  h.settings.joins.pending_seconds = 30.0;
  h.withTimers(2.0, 1000.0);
  const auto [a, b] = h.joinAB();
  REQUIRE(pushBoth(h, a, b));
  // A flood from many connections fills the table with members that never push.
  idOf(h.join("F1", "fake-1", 100), "F1");
  idOf(h.join("F2", "fake-2", 100), "F2");
  CHECK(hasError(h.join("C", "c", 100), wire::Error::TOO_MANY_WORKERS));  // seats still fresh
  h.now += 31.0;
  // Past pending_seconds a never-pushed member's seat goes to the newcomer (the oldest first).
  idOf(h.join("C", "c", 100), "C");
  CHECK(h.core->aliveWorkers() == 4);
  h.now += 20.0;
  idOf(h.join("D", "d", 100), "D");
  // No seat left without history but c's and d's, both younger than pending_seconds: the
  // workers that pushed stay.
  CHECK(hasError(h.join("G", "g", 100), wire::Error::TOO_MANY_WORKERS));
  for (uint32_t id : {a, b}) {
    bool known = false;
    for (const auto& w : h.core->lastRecord().workers) known = known || w.id == id;
    CHECK(known);
  }
  CHECK(pushBoth(h, a, b));
}

TEST_CASE("a gone member that never pushed is forgotten after pending_seconds, not 600 s") {
  Harness h;
  h.settings.joins.pending_seconds = 30.0;
  h.withTimers(2.0, 5.0);
  const auto [a, b] = h.joinAB();
  REQUIRE(pushBoth(h, a, b));
  idOf(h.join("F", "fake", 100), "F");
  for (int i = 0; i < 8; ++i) {  // the real workers stay, the fake goes silent
    h.now += 4.5;
    h.core->onMessage("A", h.heartbeat(a), 10, h.now);
    h.core->onMessage("B", h.heartbeat(b), 10, h.now);
    h.core->onTick();
  }
  REQUIRE(h.core->aliveWorkers() == 2);
  CHECK(pushBoth(h, a, b));
  for (const auto& w : h.core->lastRecord().workers) CHECK(w.name != "fake");
}

TEST_CASE("a gone member is forgotten while rounds close faster than any timer falls due") {
  // The daemon calls handleTimeout only at nextTimeout: with a round closing every 10 ms the
  // shared timer must not slide ahead with the clock, or the gone are never forgotten.
  Harness h;
  h.settings.joins.pending_seconds = 30.0;
  h.settings.max_rounds = 10000;
  h.withTimers(2.0, 5.0);
  const auto [a, b] = h.joinAB();
  idOf(h.join("F", "fake", 100), "F");
  h.core->onMessage("F", h.leave(), 10, h.now);  // gone at once, never having pushed
  REQUIRE(h.core->aliveWorkers() == 2);
  size_t ticks = 0;
  for (int step = 0; step < 4000; ++step) {  // 40 s
    h.now += 0.01;
    REQUIRE(pushBoth(h, a, b));
    if (h.now >= h.core->nextWakeup()) {
      h.core->onTick();
      ++ticks;
    }
  }
  CHECK(ticks >= 20);  // at least once a heartbeat period (2 s)
  CHECK(ticks <= 60);
  for (const auto& w : h.core->lastRecord().workers) CHECK(w.name != "fake");
}
