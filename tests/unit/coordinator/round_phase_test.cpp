// The round phase: the transitions its table holds, and a refusal of every other one.
#include "server/round_phase.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using namespace tern::server;

TEST_CASE("a fresh run waits, starts, evaluates, runs on and finishes") {
  RoundPhase p;
  CHECK(p.is(Phase::kWaiting));
  p.fire(PhaseEvent::kStart);
  CHECK(p.is(Phase::kRunning));
  p.fire(PhaseEvent::kAwaitEvaluation);
  CHECK(p.is(Phase::kEvaluating));
  p.fire(PhaseEvent::kEvaluated);
  CHECK(p.is(Phase::kRunning));
  p.fire(PhaseEvent::kFinish);
  CHECK(p.is(Phase::kDone));
}

TEST_CASE("a round left by everyone idles until a join starts it again") {
  RoundPhase p(Phase::kRunning);
  p.fire(PhaseEvent::kEveryoneGone);
  CHECK(p.is(Phase::kIdle));
  p.fire(PhaseEvent::kStart);
  CHECK(p.is(Phase::kRunning));
}

TEST_CASE("a resumed run keeps its grace deadline only while it resumes") {
  RoundPhase p(Phase::kResuming);
  p.resume_deadline = 12.0;
  p.fire(PhaseEvent::kStart);
  CHECK(p.is(Phase::kRunning));
  CHECK_FALSE(p.resume_deadline.has_value());
}

TEST_CASE("every phase but done may finish, done takes no event") {
  for (Phase from :
       {Phase::kWaiting, Phase::kResuming, Phase::kIdle, Phase::kRunning, Phase::kEvaluating}) {
    RoundPhase p(from);
    p.fire(PhaseEvent::kFinish);
    CHECK(p.is(Phase::kDone));
  }
  for (PhaseEvent e : {PhaseEvent::kStart, PhaseEvent::kEveryoneGone, PhaseEvent::kAwaitEvaluation,
                       PhaseEvent::kEvaluated, PhaseEvent::kFinish}) {
    RoundPhase done(Phase::kDone);
    CHECK_THROWS_AS(done.fire(e), std::logic_error);
    CHECK(done.is(Phase::kDone));
  }
}

TEST_CASE("transitions not in the table are refused and leave the phase as it was") {
  RoundPhase waiting;
  CHECK_THROWS_AS(waiting.fire(PhaseEvent::kEvaluated), std::logic_error);
  CHECK_THROWS_AS(waiting.fire(PhaseEvent::kAwaitEvaluation), std::logic_error);
  CHECK(waiting.is(Phase::kWaiting));
  RoundPhase running(Phase::kRunning);
  CHECK_THROWS_AS(running.fire(PhaseEvent::kStart), std::logic_error);
  RoundPhase evaluating(Phase::kEvaluating);
  CHECK_THROWS_AS(evaluating.fire(PhaseEvent::kEveryoneGone), std::logic_error);
  CHECK(evaluating.is(Phase::kEvaluating));
}
