#include "server/straggler_bench.hpp"

#include <spdlog/spdlog.h>

namespace tern::server {

bool StragglerBench::closeRound(Membership& members, uint64_t round, uint64_t& benched) {
  bool moved = false;
  for (auto& [id, w] : members.all()) {
    WorkerRecord& rec = w.rec;
    if (rec.pushed) {
      moved = moved || rec.benched;
      if (rec.benched) spdlog::info("worker {} ({}) pushed in time: off the bench", id, rec.name);
      rec.missed_in_row = 0;
      rec.benched = false;
      continue;
    }
    if (!rec.alive || !w.plan.in_round || rec.benched) continue;
    ++rec.missed_in_row;
    if (settings_.bench_after_misses == 0 || rec.missed_in_row < settings_.bench_after_misses)
      continue;
    spdlog::warn("worker {} ({}) missed {} rounds in a row (to round {}): benched", id, rec.name,
                 rec.missed_in_row, round);
    rec.benched = true;
    ++benched;
    rec.probe_round = round;  // its next probe is probe_every rounds on
    moved = true;
  }
  return moved;
}

bool StragglerBench::offers(WorkerRecord& rec, uint64_t round) const {
  if (!rec.benched) return true;
  if (round < rec.probe_round + settings_.probe_every) return false;
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
  return true;
}

}  // namespace tern::server
