#pragma once
// The quorum tally: how many members the open round waits for, how many of them pushed and how
// many have not answered, kept by push and refusal so that a push costs O(1) to check against
// the quorum (docs/performance.md, "Work per event"); recounted after any other change.
#include <cstddef>
#include <cstdint>
#include <map>

#include "server/membership.hpp"
#include "server/straggler_bench.hpp"

namespace tern::server {

struct QuorumTally {
  size_t awaited = 0;     // members the round waits for (StragglerBench::awaited)
  size_t pushed = 0;      // awaited members that pushed
  size_t unanswered = 0;  // awaited members neither pushed nor refused

  // The tally of `workers` counted one by one.
  static QuorumTally of(const std::map<uint32_t, Worker>& workers) {
    QuorumTally t;
    for (const auto& [id, w] : workers) {
      if (!StragglerBench::awaited(w)) continue;
      ++t.awaited;
      if (w.rec.pushed) ++t.pushed;
      if (!w.rec.pushed && !w.refused) ++t.unanswered;
    }
    return t;
  }
  // `w`'s push is accepted: called before w.rec.pushed is set.
  void notePush(const Worker& w) {
    if (!StragglerBench::awaited(w) || w.rec.pushed) return;
    ++pushed;
    if (!w.refused) --unanswered;
  }
  // `w`'s push is refused: called before w.refused is set.
  void noteRefusal(const Worker& w) {
    if (StragglerBench::awaited(w) && !w.rec.pushed && !w.refused) --unanswered;
  }
  // Every awaited member pushed (and there is one).
  bool allPushed() const { return awaited > 0 && pushed == awaited; }
  // Every awaited member pushed or was refused, and one pushed.
  bool allAnswered() const { return unanswered == 0 && pushed > 0; }
  bool operator==(const QuorumTally&) const = default;
};

}  // namespace tern::server
