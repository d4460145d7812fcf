// The straggler bench on the test's clock: a member that heartbeats but never pushes holds up
// bench_after_misses rounds (each waits for the deadline), then is benched: later rounds close at
// the others' pushes. It is offered a probe round every probe_every rounds, is not waited for in
// it, and a late push for its probe within the deadline brings it back.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

namespace {

bool roundStartTo(const std::vector<Outgoing>& out, const std::string& peer) {
  for (const auto& o : out) {
    if (o.peer == peer && o.message.envelope.has_round_start()) return true;
  }
  return false;
}

// A pushes the open round 0.1 s into it; returns whether that closed the round at once. If not,
// B heartbeats and the clock passes the deadline (the round closes there); `to_b` collects what
// B was sent.
bool roundOfA(Harness& h, uint32_t a, uint32_t b, double deadline, std::vector<Outgoing>& to_b) {
  const uint64_t r = h.core->round();
  const double start = h.now;
  h.now = start + 0.1;
  auto out = h.core->onMessage(
      "A", h.push(a, r, std::vector<float>(h.core->parameters().size(), 0.1f)), 50, h.now);
  to_b.insert(to_b.end(), out.begin(), out.end());
  if (h.core->round() == r + 1) return true;
  h.now = start + deadline + 0.01;
  h.core->onMessage("B", h.heartbeat(b), 10, h.now);
  out = h.core->onTick();
  to_b.insert(to_b.end(), out.begin(), out.end());
  REQUIRE(h.core->round() == r + 1);
  return false;
}

}  // namespace

TEST_CASE("a member that heartbeats but never pushes holds up three rounds, then none") {
  Harness h;
  h.withTimers(2.0, 100.0);
  const auto [a, b] = h.joinAB();
  std::vector<Outgoing> sent;
  for (int r = 0; r < 3; ++r) CHECK_FALSE(roundOfA(h, a, b, 2.0, sent));  // waited for B
  CHECK(recordOf(*h.core, b).benched);
  CHECK(h.core->benchedTotal() == 1);
  const double before = h.now;
  for (int r = 3; r < 12; ++r) CHECK(roundOfA(h, a, b, 2.0, sent));  // closed at A's push
  CHECK(h.now - before == doctest::Approx(9 * 0.1));
  CHECK(h.core->round() == 12);
}

TEST_CASE(
    "a benched member is offered a probe round, not waited for, and back after a timely "
    "push") {
  Harness h;
  h.withTimers(2.0, 100.0);
  const auto [a, b] = h.joinAB();
  std::vector<Outgoing> sent;
  for (int r = 0; r < 3; ++r) roundOfA(h, a, b, 2.0, sent);
  sent.clear();
  // Benched at round 2's close: rounds 3 to 11 sit it out, round 12 is its probe, offered as
  // round 11 closes.
  for (int r = 3; r < 11; ++r) CHECK(roundOfA(h, a, b, 2.0, sent));
  CHECK_FALSE(roundStartTo(sent, "B"));
  CHECK(roundOfA(h, a, b, 2.0, sent));
  CHECK(roundStartTo(sent, "B"));
  CHECK(h.core->round() == 12);
  CHECK(roundOfA(h, a, b, 2.0, sent));  // the probe round, closed at A's push all the same
  // B's push for its probe comes 0.5 s after the probe's round start: within the deadline.
  h.now += 0.4;
  h.core->onMessage("B", h.push(b, 12, std::vector<float>(h.core->parameters().size(), 0.1f)), 50,
                    h.now);
  CHECK(h.core->round() == 13);
  CHECK_FALSE(roundOfA(h, a, b, 2.0, sent));  // round 13 waits for B again
}

TEST_CASE("with bench_after_misses 0 every round waits for the silent member") {
  Harness h;
  h.settings.stragglers.bench_after_misses = 0;
  h.withTimers(2.0, 100.0);
  const auto [a, b] = h.joinAB();
  std::vector<Outgoing> sent;
  for (int r = 0; r < 6; ++r) CHECK_FALSE(roundOfA(h, a, b, 2.0, sent));
  CHECK_FALSE(recordOf(*h.core, b).benched);
}

namespace {

// A and B joined to a core of `max_rounds` whose rounds close 2 s after they start.
std::pair<uint32_t, uint32_t> joinedAB(Harness& h, uint64_t max_rounds) {
  h.settings.max_rounds = max_rounds;
  h.withTimers(2.0, 100.0);
  return h.joinAB();
}

// Both push the open round (B first); the round closes at A's push.
void roundOfBoth(Harness& h, uint32_t a, uint32_t b) {
  const uint64_t r = h.core->round();
  const std::vector<float> g(h.core->parameters().size(), 0.1f);
  h.now += 0.05;
  h.core->onMessage("B", h.push(b, r, g), 50, h.now);
  h.now += 0.05;
  h.core->onMessage("A", h.push(a, r, g), 50, h.now);
  REQUIRE(h.core->round() == r + 1);
}

// Runs `rounds` rounds in which B pushes only its probes (late, within the deadline); returns
// how many rounds waited for B, and the rounds it was probed in.
int probeOnlyRounds(Harness& h, uint32_t a, uint32_t b, int rounds, std::vector<uint64_t>& probes) {
  int waited = 0;
  uint64_t probe = UINT64_MAX;  // none
  for (int i = 0; i < rounds; ++i) {
    std::vector<Outgoing> sent;
    const uint64_t r = h.core->round();
    if (!roundOfA(h, a, b, 2.0, sent)) ++waited;
    if (probe == r) {
      h.now += 0.4;
      h.core->onMessage("B", h.push(b, r, std::vector<float>(h.core->parameters().size(), 0.1f)),
                        50, h.now);
      probe = UINT64_MAX;
    }
    if (recordOf(*h.core, b).benched && roundStartTo(sent, "B")) {
      probe = r + 1;
      probes.push_back(r + 1);
    }
  }
  return waited;
}

}  // namespace

TEST_CASE("a member that pushes only its probes holds up fewer and fewer rounds") {
  // Back from the bench on probation, one miss benches it again and its probes come twice as
  // far apart each time: over 400 rounds it holds up 3 + one a probe, not 3 every 13 rounds.
  Harness h;
  const auto [a, b] = joinedAB(h, 1000);
  std::vector<uint64_t> probes;
  const int waited = probeOnlyRounds(h, a, b, 400, probes);
  REQUIRE(probes.size() >= 4);
  CHECK(waited <= 3 + int(probes.size()));
  CHECK(waited <= 12);
  for (size_t k = 2; k < probes.size(); ++k)
    CHECK(probes[k] - probes[k - 1] > probes[k - 1] - probes[k - 2]);
}

TEST_CASE("a member that keeps up for probe_every rounds after the bench is on probation no more") {
  Harness h;
  h.withTimers(2.0, 100.0);
  const auto [a, b] = h.joinAB();
  std::vector<uint64_t> probes;
  probeOnlyRounds(h, a, b, 13, probes);  // benched after 3, probed in round 12, back on probation
  REQUIRE(probes.size() == 1);
  roundOfBoth(h, a, b);  // (records are read as of the last round's close)
  CHECK_FALSE(recordOf(*h.core, b).benched);
  CHECK(recordOf(*h.core, b).benchings == 1);  // on probation
  for (int r = 1; r < 10; ++r) roundOfBoth(h, a, b);
  CHECK(recordOf(*h.core, b).benchings == 0);
  std::vector<Outgoing> sent;
  // Silent again: three misses before the bench, as at first.
  for (int r = 0; r < 3; ++r) CHECK_FALSE(roundOfA(h, a, b, 2.0, sent));
  CHECK(recordOf(*h.core, b).benched);
  CHECK(recordOf(*h.core, b).benchings == 1);
}

TEST_CASE("a member benched when the run ends is sent the whole final model with its Finish") {
  Harness h;
  const auto [a, b] = joinedAB(h, 8);
  std::vector<Outgoing> sent;
  while (!h.core->finished()) roundOfA(h, a, b, 2.0, sent);
  const Message* finish = nullptr;
  for (const auto& o : sent) {
    if (o.peer == "B" && o.message.envelope.has_finish()) finish = &o.message;
  }
  REQUIRE(finish != nullptr);
  CHECK(finish->envelope.finish().full_model());
  const auto& params = h.core->parameters();
  REQUIRE(finish->payload.size() == params.size() * sizeof(float));
  CHECK(std::memcmp(finish->payload.data(), params.data(), finish->payload.size()) == 0);
  // A, one step behind, gets the last step only.
  for (const auto& o : sent) {
    if (o.peer == "A" && o.message.envelope.has_finish())
      CHECK_FALSE(o.message.envelope.finish().full_model());
  }
}
