// The coordinator core at the end of training: every worker is told to finish (one marked gone
// without the last step), and the core knows when each that answers a Finish has left.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

TEST_CASE("a finished coordinator knows when every worker told to finish has answered") {
  Harness h;
  h.settings.max_rounds = 1;
  h.withTimers(100.0, 100.0);
  CHECK(h.core->finishAcknowledged());  // nobody told anything yet
  // A and B say they answer a Finish; C is of an older tern that does not, and is not waited for.
  const uint32_t a = h.joinAnsweringFinish("A", "a"), b = h.joinAnsweringFinish("B", "b");
  const uint32_t c = h.joinAnsweringFinish("C", "c", false);
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, 0, ramp(d, 1.0f, 1.0f)), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, ramp(d, 0.0f, 1.0f)), 50, h.now);
  const auto out = h.core->onMessage("C", h.push(c, 0, ramp(d, 2.0f, 1.0f)), 50, h.now);
  REQUIRE(h.core->finished());
  CHECK(std::count_if(out.begin(), out.end(),
                      [](const Outgoing& o) { return o.message.envelope.has_finish(); }) == 3);
  CHECK_FALSE(h.core->finishAcknowledged());
  CHECK(h.core->finishUnacknowledged() == 2);
  const uint64_t rejected = h.core->rejectedTotal();
  // A Leave of another session, or from a peer that is no worker, does not count as an answer.
  Message stale = h.leave();
  stale.envelope.mutable_leave()->set_session(h.session + 1);
  CHECK(hasError(h.core->onMessage("A", stale, 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK(hasError(h.core->onMessage("X", h.leave(), 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK(h.core->rejectedTotal() == rejected + 1);  // only the stranger's is at fault
  CHECK(h.core->finishUnacknowledged() == 2);
  // A heartbeat that crossed the Finish is answered, not counted: the run's record is closed.
  const Message hb = h.heartbeat(b);
  CHECK(hasError(h.core->onMessage("B", hb, 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK(h.core->rejectedTotal() == rejected + 1);
  CHECK(h.core->onMessage("A", h.leave(), 10, h.now).empty());
  CHECK(h.core->finishUnacknowledged() == 1);
  // A second Leave of A's is answered like any message after the end, and counts for nothing.
  CHECK(hasError(h.core->onMessage("A", h.leave(), 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK_FALSE(h.core->finishAcknowledged());
  CHECK(h.core->onMessage("B", h.leave(), 10, h.now).empty());
  CHECK(h.core->finishAcknowledged());
  CHECK(h.core->rejectedTotal() == rejected + 1);
}

TEST_CASE("a worker marked gone is told that training finished too, without the last step") {
  Harness h;
  h.settings.max_rounds = 1;
  h.withTimers(30.0, 5.0);
  const uint32_t a = h.joinAnsweringFinish("A", "a");
  h.joinAnsweringFinish("B", "b");
  // B falls silent with its push awaited (its first: the round's deadline) and is marked gone.
  h.now = 29.0;
  h.core->onMessage("A", h.heartbeat(a), 10, h.now);
  h.core->onTick();
  REQUIRE(h.core->aliveWorkers() == 2);
  h.now = 30.0;
  h.core->onMessage("A", h.heartbeat(a), 10, h.now);
  h.core->onTick();
  REQUIRE(h.core->aliveWorkers() == 1);
  REQUIRE_FALSE(h.core->finished());
  const size_t d = h.core->parameters().size();
  const auto out = h.core->onMessage("A", h.push(a, 0, ramp(d, 1.0f, 1.0f)), 50, h.now);
  REQUIRE(h.core->finished());
  std::map<std::string, const Message*> finish;
  for (const auto& o : out)
    if (o.message.envelope.has_finish()) finish[o.peer] = &o.message;
  REQUIRE(finish.size() == 2);
  CHECK_FALSE(finish.at("A")->payload.empty());  // the last step
  CHECK(finish.at("B")->payload.empty());        // its replica is not the model's
  // Only A is waited for; B's answer, should it come, is answered without counting against it.
  CHECK(h.core->finishUnacknowledged() == 1);
  const uint64_t rejected = h.core->rejectedTotal();
  CHECK(hasError(h.core->onMessage("B", h.leave(), 10, h.now), wire::Error::SHUTTING_DOWN));
  CHECK(h.core->rejectedTotal() == rejected);
  CHECK(h.core->finishUnacknowledged() == 1);
  CHECK(h.core->onMessage("A", h.leave(), 10, h.now).empty());
  CHECK(h.core->finishAcknowledged());
}
