// When a round may close: the members it waits for (those holding a seat and not benched as
// stragglers), whether they have all answered, the data share that pushed, and bringing the
// benched back when a round stalls (docs/reliability.md, "Stragglers").
#include <spdlog/spdlog.h>

#include <cassert>

#include "server/coordinator_core.hpp"

namespace tern::server {

const QuorumTally& CoordinatorCore::tally() const {
  assert(!tally_ || *tally_ == QuorumTally::of(membership_.all()));
  if (!tally_) tally_ = QuorumTally::of(membership_.all());
  return *tally_;
}

bool CoordinatorCore::allPushed() const { return tally().allPushed(); }

bool CoordinatorCore::allAnswered() const {
  return tally().allAnswered() && (allPushed() || pushedShare() >= options_.quorum_share);
}

double CoordinatorCore::pushedShare() const {
  // Over the round's awaited members: one sitting the round out (or benched) holds a share of
  // the next plan, or none.
  double pushed = 0.0, members = 0.0;
  bool sitting_out = false;
  for (const auto& [id, w] : membership_.all()) {
    if (!w.rec.alive) continue;
    if (!StragglerBench::awaited(w)) {
      sitting_out = true;
      continue;
    }
    members += w.rec.share;
    if (w.rec.pushed) pushed += w.rec.share;
  }
  if (!sitting_out) return pushed;  // the shares of the alive workers sum to one
  return members > 0.0 ? pushed / members : 0.0;
}

void CoordinatorCore::recallBenched() {
  // The bench skips members only while the others make progress: a stalled round waits for all.
  bool any = false;
  for (auto& [id, w] : membership_.all()) {
    if (!w.rec.alive || !w.rec.benched) continue;
    spdlog::warn("round {}: too little pushed by its deadline; worker {} ({}) off the bench",
                 round_, id, w.rec.name);
    w.rec.benched = false;
    w.rec.missed_in_row = 0;
    any = true;
  }
  if (!any) return;
  tallyStale();
  planner_.plan(membership_);
  admitSittingOut();
}

}  // namespace tern::server
