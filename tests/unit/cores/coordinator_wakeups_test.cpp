// The coordinator core's kept wake-ups: after every event of a seeded random run (joins,
// re-joins, pushes, heartbeats, leaves, silences and ticks on a moving clock), nextTimeout
// equals a walk over every worker.
#include <doctest/doctest.h>

#include <map>
#include <random>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

namespace {

// A random run of `steps` events over `workers` peers; counts what it exercised.
struct RandomRun {
  Harness h;
  std::mt19937 rng;
  std::map<std::string, uint32_t> ids;     // peer -> id of its last welcome
  std::map<std::string, uint64_t> rounds;  // peer -> round of its last round start
  size_t checks = 0, mismatches = 0;

  RandomRun(uint32_t seed, double heartbeat) : rng(seed) {
    h.settings.heartbeat_seconds = heartbeat;
    h.settings.max_rounds = 1000;
    h.withTimers(4.0, 3.0);
  }

  void note(const std::vector<Outgoing>& out) {
    for (const auto& o : out) {
      if (o.message.envelope.has_welcome()) ids[o.peer] = o.message.envelope.welcome().worker_id();
      if (o.message.envelope.has_round_start())
        rounds[o.peer] = o.message.envelope.round_start().round();
    }
  }

  void event(const std::string& peer, int kind) {
    const size_t d = h.core->parameters().size();
    if (kind == 0 || !ids.count(peer)) {
      note(h.join(peer, peer, 50 + 50 * (rng() % 4)));
    } else if (kind <= 3) {
      const float v = float(rng() % 100) / 50.0f - 1.0f;
      note(h.core->onMessage(peer, h.push(ids[peer], rounds[peer], std::vector<float>(d, v)),
                             40 + rng() % 400, h.now));
    } else if (kind <= 5) {
      note(h.core->onMessage(peer, h.heartbeat(ids[peer]), 10, h.now));
    } else if (kind == 6) {
      note(h.core->onMessage(peer, h.leave(), 10, h.now));
      ids.erase(peer);
    }  // else: silent
  }

  void run(size_t steps, size_t workers) {
    for (size_t s = 0; s < steps && !h.core->finished(); ++s) {
      h.now += double(rng() % 1000) / 1000.0;
      if (h.now >= h.core->nextWakeup()) note(h.core->onTick());
      std::string peer = "P";
      peer += std::to_string(rng() % workers);
      event(peer, int(rng() % 10));
      ++checks;
      if (h.core->nextWakeup() != h.core->nextTimeoutByWalk(h.now)) ++mismatches;
    }
  }
};

}  // namespace

TEST_CASE("the kept wake-ups equal a walk over every worker after every event of a random run") {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    RandomRun r(seed, seed % 2 ? 1.0 : 20.0);  // heartbeats due first, or patience first
    r.run(1500, 6);
    CHECK(r.checks == 1500);
    CHECK(r.mismatches == 0);
    CHECK(r.h.core->round() > 20);  // rounds closed, by pushes and by deadlines
    CHECK(r.h.core->counters().rejectedTotal() > 0);
  }
}
