#pragma once
// The straggler bench (docs/reliability.md, "Stragglers"): a member that held a seat in
// bench_after_misses rounds in a row and let each close without its push is benched. A benched
// member is not waited for: it sits rounds out, offered one round (a probe) every probe_every
// rounds. A push for its probe that arrives while the round is open, or later but within a round
// deadline of the probe's round start, shows it can push in time: it leaves the bench, on
// probation: until it has pushed in time probe_every rounds in a row, one missed round benches it
// again, and each benching doubles the rounds between its probes (up to kMostDoublings times), so
// that a member that pushes only its probes holds up fewer and fewer rounds.
#include <cstdint>

#include "common/config/settings.hpp"
#include "server/membership.hpp"

namespace tern::server {

class StragglerBench {
 public:
  explicit StragglerBench(const config::StragglerSettings& settings) : settings_(settings) {}

  // At a round's close: a seat held without a push is a miss, a push clears the misses and the
  // bench; `benched` counts the members benched. Returns whether anyone was benched or left the
  // bench (the caps are planned anew).
  bool closeRound(Membership& members, uint64_t round, uint64_t& benched);
  // At a round's start: whether benched `w` is offered `round` (a probe, not waited for).
  bool offers(WorkerRecord& rec, uint64_t round) const;
  // A benched member's push for `push_round` that came after its round closed, `seconds` after
  // its round start: true when it leaves the bench (its probe, in at most `deadline`).
  bool latePush(WorkerRecord& rec, uint64_t push_round, double seconds, double deadline) const;
  // Whether the round waits for `w`'s push: it holds a seat and is not benched.
  static bool awaited(const Worker& w) { return w.rec.alive && w.plan.in_round && !w.rec.benched; }
  // Rounds between a benched member's probes: probe_every, doubled for each benching after the
  // first since it last kept up (at most 2^kMostDoublings times).
  uint64_t probeInterval(const WorkerRecord& rec) const;
  static constexpr uint32_t kMostDoublings = 10;

 private:
  config::StragglerSettings settings_;
};

}  // namespace tern::server
