#pragma once
// The coordinator's round phase: one enum, and every allowed transition in one table (data, as
// python-hyper h11 keeps its state machine). A transition not in the table is a bug: it throws.
#include <cstdint>
#include <optional>

namespace tern::server {

enum class Phase : uint8_t {
  kWaiting,     // never started: waits for min_workers
  kResuming,    // restored from a checkpoint: waits for min_workers, or a grace after the first
  kIdle,        // started, then every worker went: the first to join starts the round again
  kRunning,     // collecting pushes for the open round
  kEvaluating,  // the round closed; waits for the driver's evaluation of the new model
  kDone,        // training finished (or stopped): workers were told to finish
};

enum class PhaseEvent : uint8_t {
  kStart,            // enough workers (or the resume grace): the round starts
  kEveryoneGone,     // the round's deadline passed with no worker alive
  kAwaitEvaluation,  // the round closed on an evaluation boundary
  kEvaluated,        // the evaluation answered: the next round starts
  kFinish,           // max_rounds, target accuracy or a stop
};

const char* phaseName(Phase p);

class RoundPhase {
 public:
  explicit RoundPhase(Phase initial = Phase::kWaiting) : phase_(initial) {}
  Phase get() const { return phase_; }
  bool is(Phase p) const { return phase_ == p; }
  // Moves along the table; throws std::logic_error for a transition it does not hold.
  void fire(PhaseEvent e);
  // The resume grace's end, set by the first worker back (kResuming only).
  std::optional<double> resume_deadline;

 private:
  Phase phase_;
};

}  // namespace tern::server
