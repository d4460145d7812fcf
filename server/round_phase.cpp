#include "server/round_phase.hpp"

#include <array>
#include <stdexcept>
#include <string>

namespace tern::server {
namespace {

struct Transition {
  Phase from;
  PhaseEvent event;
  Phase to;
};

constexpr std::array kTable{
    Transition{Phase::kWaiting, PhaseEvent::kStart, Phase::kRunning},
    Transition{Phase::kResuming, PhaseEvent::kStart, Phase::kRunning},
    Transition{Phase::kIdle, PhaseEvent::kStart, Phase::kRunning},
    Transition{Phase::kRunning, PhaseEvent::kEveryoneGone, Phase::kIdle},
    Transition{Phase::kRunning, PhaseEvent::kAwaitEvaluation, Phase::kEvaluating},
    Transition{Phase::kEvaluating, PhaseEvent::kEvaluated, Phase::kRunning},
    Transition{Phase::kWaiting, PhaseEvent::kFinish, Phase::kDone},
    Transition{Phase::kResuming, PhaseEvent::kFinish, Phase::kDone},
    Transition{Phase::kIdle, PhaseEvent::kFinish, Phase::kDone},
    Transition{Phase::kRunning, PhaseEvent::kFinish, Phase::kDone},
    Transition{Phase::kEvaluating, PhaseEvent::kFinish, Phase::kDone},
};

}  // namespace

const char* phaseName(Phase p) {
  switch (p) {
    case Phase::kWaiting:
      return "waiting";
    case Phase::kResuming:
      return "resuming";
    case Phase::kIdle:
      return "idle";
    case Phase::kRunning:
      return "running";
    case Phase::kEvaluating:
      return "evaluating";
    case Phase::kDone:
      return "done";
  }
  return "?";
}

void RoundPhase::fire(PhaseEvent e) {
  for (const Transition& t : kTable) {
    if (t.from == phase_ && t.event == e) {
      phase_ = t.to;
      if (phase_ != Phase::kResuming) resume_deadline.reset();
      return;
    }
  }
  throw std::logic_error(std::string("round phase: no transition from ") + phaseName(phase_) +
                         " on event " + std::to_string(int(e)));
}

}  // namespace tern::server
