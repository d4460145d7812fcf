// The quorum tally and the by-peer index against brute-force recounts over random sequences of
// joins, pushes, refusals, leaves, seats and benching.
#include "server/quorum_tally.hpp"

#include <doctest/doctest.h>

#include <random>

#include "server/membership.hpp"

using namespace tern;
using namespace tern::server;

namespace {

// The questions the round asks, answered by walking every worker.
struct Reference {
  bool all_pushed = false;
  bool all_answered = false;  // before the quorum share
};

Reference recount(const std::map<uint32_t, Worker>& workers) {
  Reference r;
  bool any = false, unanswered = false, not_pushed = false;
  for (const auto& [id, w] : workers) {
    if (!w.rec.alive || !w.plan.in_round || w.rec.benched) continue;
    any = any || w.rec.pushed;
    not_pushed = not_pushed || !w.rec.pushed;
    unanswered = unanswered || (!w.rec.pushed && !w.refused);
    r.all_pushed = true;
  }
  r.all_pushed = r.all_pushed && !not_pushed;
  r.all_answered = !unanswered && any;
  return r;
}

size_t count(const std::map<uint32_t, Worker>& workers, bool (*pred)(const Worker&)) {
  size_t n = 0;
  for (const auto& [id, w] : workers) n += pred(w) ? 1 : 0;
  return n;
}

wire::Join join(const std::string& name) {
  wire::Join j;
  j.set_worker_name(name);
  j.set_sample_count(10);
  return j;
}

}  // namespace

TEST_CASE("the running quorum tally agrees with a recount over random joins, pushes and leaves") {
  std::mt19937 rng(43);
  for (int trial = 0; trial < 50; ++trial) {
    std::map<uint32_t, Worker> workers;
    std::optional<QuorumTally> tally;
    for (int step = 0; step < 400; ++step) {
      const uint32_t id = rng() % 12;
      Worker& w = workers[id];
      switch (rng() % 8) {
        case 0:
        case 1:  // a push (accepted even when not awaited: a probe, or a late duplicate)
          if (tally) tally->notePush(w);
          w.rec.pushed = true;
          break;
        case 2:  // a refused push
          if (tally) tally->noteRefusal(w);
          w.refused = true;
          break;
        case 3:  // a join or a leave
          w.rec.alive = !w.rec.alive;
          tally.reset();
          break;
        case 4:  // a seat given or taken back
          w.plan.in_round = !w.plan.in_round;
          tally.reset();
          break;
        case 5:  // benched or back
          w.rec.benched = !w.rec.benched;
          tally.reset();
          break;
        case 6:  // a new round
          for (auto& [i, x] : workers) x.rec.pushed = x.refused = false;
          tally.reset();
          break;
        default:
          break;
      }
      if (!tally) tally = QuorumTally::of(workers);
      const Reference ref = recount(workers);
      REQUIRE(tally->allPushed() == ref.all_pushed);
      REQUIRE(tally->allAnswered() == ref.all_answered);
      REQUIRE(tally->awaited == count(workers, [](const Worker& x) {
                return x.rec.alive && x.plan.in_round && !x.rec.benched;
              }));
    }
  }
}

TEST_CASE("byPeer finds what a scan of the table finds over random joins, moves and forgetting") {
  std::mt19937 rng(7);
  Membership m;
  const std::string peers[] = {"P0", "P1", "P2", "P3", "P4"};
  double now = 0.0;
  for (int step = 0; step < 2000; ++step) {
    now += 1.0;
    const std::string name(1, char('a' + rng() % 9));
    const std::string& peer = peers[rng() % 5];
    switch (rng() % 4) {
      case 0:  // a join, or a re-join on another connection
        m.admit(peer, join(name), now).rec.alive = true;
        break;
      case 1:  // gone
        if (Worker* w = m.byName(name)) w->rec.alive = false;
        break;
      case 2:  // long gone ones forgotten
        m.forget(now, 3.0);
        break;
      default:  // a full table makes room
        m.makeRoom(name, m.all().size(), now, 2.0);
        break;
    }
    for (const std::string& p : peers) {
      const Worker* scan = nullptr;
      for (const auto& [id, w] : m.all()) {
        if (w.peer == p && w.rec.alive) {
          scan = &w;
          break;
        }
      }
      REQUIRE(m.byPeer(p) == scan);
    }
  }
}
