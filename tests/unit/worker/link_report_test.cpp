// Which pushes carry the link model: the first after each welcome, one whose model moved by more
// than a tenth from the copy the coordinator took, and every 16th; the coordinator's copy is the
// one an acknowledged push carried.
#include "worker/link_report.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "tests/unit/worker/worker_rig.hpp"

using namespace tern;
using tern::worker::linkMoved;
using tern::worker::LinkReport;

namespace {

wire::LinkModel model(double a, double b, uint32_t packet = 1448, uint64_t samples = 32) {
  wire::LinkModel m;
  m.set_a_seconds(a);
  m.set_b_seconds_per_packet(b);
  m.set_packet_bytes(packet);
  m.set_samples(samples);
  return m;
}

}  // namespace

TEST_CASE("a link model moves when b moves by more than a tenth, or a by a tenth of a + b") {
  const auto was = model(0.010, 0.004);
  CHECK_FALSE(linkMoved(was, was));
  CHECK_FALSE(linkMoved(was, model(0.010, 0.00439)));
  CHECK(linkMoved(was, model(0.010, 0.00441)));
  CHECK(linkMoved(was, model(0.010, 0.00359)));
  CHECK_FALSE(linkMoved(was, model(0.0113, 0.004)));  // 1.3 ms of 14
  CHECK(linkMoved(was, model(0.0115, 0.004)));        // 1.5 ms of 14
  CHECK(linkMoved(was, model(0.010, 0.004, 1400)));
  CHECK(linkMoved(model(0, 0, 1448, 0), model(0, 0, 1448, 1)));
  CHECK_FALSE(linkMoved(model(0, 0, 1448, 0), model(0, 0, 1448, 0)));  // nothing measured
  CHECK(linkMoved(model(0, 0), model(0, 1e-6)));                       // a first b
  CHECK(linkMoved(model(0.010, 0.004, 1448, 8), model(0.010, 0.004, 1448, 16)));
  CHECK_FALSE(linkMoved(model(0.010, 0.004, 1448, 8), model(0.010, 0.004, 1448, 15)));
  auto unidentified = model(0.010, 0.004);
  unidentified.set_b_stderr(std::numeric_limits<double>::infinity());
  CHECK(linkMoved(unidentified, was));
  CHECK(linkMoved(was, unidentified));
}

TEST_CASE("a model goes with the first push, then only when moved or every 16th push") {
  LinkReport r;
  const auto steady = model(0.010, 0.004);
  REQUIRE(r.forPush(0, steady).has_value());
  r.taken(0);
  std::vector<uint64_t> carried;
  for (uint64_t round = 1; round <= 40; ++round) {
    if (r.forPush(round, steady)) carried.push_back(round);
    r.taken(round);
  }
  CHECK(carried == std::vector<uint64_t>{16, 32});
  const auto moved = model(0.010, 0.0045);
  REQUIRE(r.forPush(41, moved).has_value());
  r.taken(41);
  CHECK_FALSE(r.forPush(42, model(0.010, 0.0046)).has_value());  // within a tenth of 0.0045
  CHECK_FALSE(r.forPush(43, model(0.010, 0.0042)).has_value());  // and 0.0042
}

TEST_CASE("the coordinator's copy is the one an acknowledged push carried") {
  LinkReport r;
  REQUIRE(r.forPush(0, model(0.010, 0.004)).has_value());
  // Never acknowledged (lost, or refused unseen): the next push carries a model again.
  REQUIRE(r.forPush(1, model(0.010, 0.004)).has_value());
  r.taken(0);  // an ack of a push that no longer holds the latest model changes nothing
  REQUIRE(r.forPush(2, model(0.010, 0.004)).has_value());
  r.taken(2);
  CHECK_FALSE(r.forPush(3, model(0.010, 0.004)).has_value());
  // Moved, sent, not acknowledged: compared with the copy taken, the next push carries it again.
  REQUIRE(r.forPush(4, model(0.010, 0.006)).has_value());
  CHECK(r.forPush(5, model(0.010, 0.006)).has_value());
  r.taken(5);
  CHECK_FALSE(r.forPush(6, model(0.010, 0.006)).has_value());
  r.reset();  // a welcome: a new session or another process under the name
  CHECK(r.forPush(7, model(0.010, 0.006)).has_value());
}

TEST_CASE("a worker's pushes carry its link model as LinkReport says, and after each welcome") {
  testing::Rig rig(0, 2, 12000);
  rig.welcome();
  std::vector<bool> carried;
  for (uint64_t r = 0; r < 48; ++r) {
    const auto out = rig.roundStart(r);
    for (const auto& m : out)
      if (testing::isPush(m)) carried.push_back(m.envelope.push().has_link());
    rig.send(out);
    rig.deliverAcks();
  }
  REQUIRE(carried.size() == 48);
  CHECK(carried[0]);
  size_t with = 0;
  for (bool c : carried) with += c ? 1 : 0;
  // The calibration train moves the fit at first; once it settles, about one push in 16.
  size_t late = 0;
  for (size_t i = 32; i < carried.size(); ++i) late += carried[i] ? 1 : 0;
  CHECK(late >= 1);
  CHECK(late <= 4);
  CHECK(with < carried.size() / 2);
  rig.newSession();
  rig.welcome();
  const auto out = rig.roundStart(0);
  bool first = false;
  for (const auto& m : out)
    if (testing::isPush(m)) first = m.envelope.push().has_link();
  CHECK(first);
}
