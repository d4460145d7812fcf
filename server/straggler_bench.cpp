#include "server/straggler_bench.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace tern::server {

namespace {

// A push in time: the misses end; on probation, probe_every of them in a row end it.
void keptUp(WorkerRecord& rec, uint32_t probe_every) {
  rec.missed_in_row = 0;
  rec.benched = false;
  if (rec.benchings == 0) return;
  if (++rec.in_time_streak >= probe_every) {
    rec.benchings = 0;
    rec.in_time_streak = 0;
  }
}

}  // namespace

bool StragglerBench::closeRound(Membership& members, uint64_t round, uint64_t& benched) {
  bool moved = false;
  for (auto& [id, w] : members.all()) {
    WorkerRecord& rec = w.rec;
    if (rec.pushed) {
      moved = moved || rec.benched;
      if (rec.benched) spdlog::info("worker {} ({}) pushed in time: off the bench", id, rec.name);
      keptUp(rec, settings_.probe_every);
      continue;
    }
    if (!rec.alive || !w.plan.in_round || rec.benched) continue;
    ++rec.missed_in_row;
    rec.in_time_streak = 0;
    // On probation (back from the bench, not yet kept up) one miss is enough.
    const uint32_t allowed = rec.benchings > 0 ? 1 : settings_.bench_after_misses;
    if (settings_.bench_after_misses == 0 || rec.missed_in_row < allowed) continue;
    ++rec.benchings;
    spdlog::warn(
        "worker {} ({}) missed {} rounds in a row (to round {}): benched, probed every {} "
        "rounds",
        id, rec.name, rec.missed_in_row, round, probeInterval(rec));
    rec.benched = true;
    ++benched;
    rec.probe_round = round;  // its next probe is probeInterval rounds on
    moved = true;
  }
  return moved;
}

uint64_t StragglerBench::probeInterval(const WorkerRecord& rec) const {
  const uint32_t doublings = std::min(rec.benchings > 0 ? rec.benchings - 1 : 0, kMostDoublings);
  return uint64_t(settings_.probe_every) << doublings;
}

bool StragglerBench::offers(WorkerRecord& rec, uint64_t round) const {
  if (!rec.benched) return true;
  if (round < rec.probe_round + probeInterval(rec)) return false;
  rec.probe_round = round;
  return true;
}

bool StragglerBench::latePush(WorkerRecord& rec, uint64_t push_round, double seconds,
                              double deadline) const {
  if (!rec.benched || push_round != rec.probe_round || seconds > deadline) return false;
  spdlog::info("worker {} ({}) pushed its probe round {} within the deadline: off the bench",
               rec.id, rec.name, push_round);
  rec.benched = false;
  rec.missed_in_row = 0;
  rec.in_time_streak = 0;
  return true;
}

}  // namespace tern::server
