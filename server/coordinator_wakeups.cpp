// When the coordinator next has timer work: each alive worker's wake-up (marked gone when
// silent past its patience, sent a heartbeat when nothing went to it for a period) kept in a
// heap, recomputed for the workers an event touched and rebuilt when a round starts or closes
// (docs/performance.md, "Work per event").
#include <algorithm>

#include "server/coordinator_core.hpp"

namespace tern::server {

double CoordinatorCore::sharedTimeout(double now) const {
  // At least once a heartbeat period whatever the traffic: a run whose rounds close faster than
  // any timer falls due must still forget the long gone (their rows fill the CSV and the log).
  double t = std::min(now + options_.heartbeat_seconds, housekeeping_at_);
  if (phase_.is(Phase::kRunning)) t = std::min(t, round_deadline_);
  // The resume grace matters only while a worker is back (else: a wake-up in the past).
  if (phase_.is(Phase::kResuming) && phase_.resume_deadline && membership_.alive() > 0)
    t = std::min(t, *phase_.resume_deadline);
  return t;
}

double CoordinatorCore::wakeupOf(const Worker& w, const PatienceContext& context) const {
  return std::min(w.last_seen + patienceFor(w, context), w.last_sent + options_.heartbeat_seconds);
}

double CoordinatorCore::nextTimeoutByWalk(double now) const {
  double t = sharedTimeout(now);
  const PatienceContext context = patience();
  for (const auto& [id, w] : membership_.all()) {
    if (w.rec.alive) t = std::min(t, wakeupOf(w, context));
  }
  return t;
}

void CoordinatorCore::refreshWakes() const {
  const PatienceContext context = patience();
  if (wakes_stale_ || wakes_context_ != context) {
    std::vector<std::pair<uint32_t, double>> all;
    all.reserve(membership_.all().size());
    for (const auto& [id, w] : membership_.all()) {
      if (w.rec.alive) all.emplace_back(id, wakeupOf(w, context));
    }
    wakes_.assign(all);
    wakes_stale_ = false;
    wakes_context_ = context;
  } else {
    const auto& table = membership_.all();
    for (uint32_t id : wake_moved_) {
      const auto it = table.find(id);
      if (it != table.end() && it->second.rec.alive) {
        wakes_.set(id, wakeupOf(it->second, context));
      } else {
        wakes_.remove(id);
      }
    }
  }
  wake_moved_.clear();
}

double CoordinatorCore::nextTimeout(double now) const {
  refreshWakes();
  double t = sharedTimeout(now);
  // A worker forgotten, or gone by a path that did not say so, leaves the heap here.
  const auto& table = membership_.all();
  while (const auto first = wakes_.earliest()) {
    const auto it = table.find(first->first);
    if (it != table.end() && it->second.rec.alive) return std::min(t, first->second);
    wakes_.remove(first->first);
  }
  return t;
}

}  // namespace tern::server
