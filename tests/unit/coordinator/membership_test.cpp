// Membership: the join checks, ids kept over re-joins, patience, and forgetting.
#include "server/membership.hpp"

#include <doctest/doctest.h>

#include <limits>

using namespace tern;
using namespace tern::server;

namespace {

wire::Join join(const std::string& name, uint64_t samples = 10, uint64_t instance = 0) {
  wire::Join j;
  j.set_worker_name(name);
  j.set_sample_count(samples);
  j.set_instance(instance);
  return j;
}

}  // namespace

TEST_CASE("a join is refused for its samples, its name or a message limit below the model's") {
  Membership m;
  CHECK(m.checkJoin("A", join("a", 0), 100, 10, 600)->reason == "bad_join");
  CHECK(m.checkJoin("A", join("a", Membership::kMaxSamplesPerWorker + 1), 100, 10, 600)->reason ==
        "bad_join");
  CHECK(m.checkJoin("A", join(""), 100, 10, 600)->reason == "bad_join");
  wire::Join small = join("a");
  small.set_max_message_bytes(99);
  const auto refusal = m.checkJoin("A", small, 100, 10, 600);
  REQUIRE(refusal);
  CHECK(refusal->code == wire::Error::MESSAGE_LIMIT);
  small.set_max_message_bytes(100);
  CHECK_FALSE(m.checkJoin("A", small, 100, 10, 600));
}

TEST_CASE("a name held by a live process refuses another process, not a reconnect") {
  Membership m;
  Worker& a = m.admit("A", join("a", 10, 7));
  a.rec.alive = true;
  CHECK(m.checkJoin("B", join("a", 10, 8), 1, 10, 600)->code == wire::Error::NAME_TAKEN);
  CHECK_FALSE(m.checkJoin("B", join("a", 10, 7), 1, 10, 600));
  a.rec.alive = false;
  CHECK_FALSE(m.checkJoin("B", join("a", 10, 8), 1, 10, 600));
}

TEST_CASE("a re-join keeps the id, a new name past max_workers is refused") {
  Membership m;
  const uint32_t a = m.admit("A", join("a")).rec.id;
  const uint32_t b = m.admit("B", join("b")).rec.id;
  CHECK(a != b);
  CHECK(m.admit("C", join("a")).rec.id == a);
  CHECK(m.all().size() == 2);
  CHECK(m.checkJoin("D", join("d"), 1, 2, 600)->code == wire::Error::TOO_MANY_WORKERS);
  CHECK_FALSE(m.checkJoin("D", join("a"), 1, 2, 600));
}

TEST_CASE("another process under a name starts with nothing measured") {
  Membership m;
  Worker& w = m.admit("A", join("a", 10, 1));
  w.push_price = allocation::PushPrice{40.0, 8.0};
  w.observed_push_seconds = 2.0;
  m.admit("A", join("a", 10, 1));
  CHECK(w.push_price.has_value());
  m.admit("A", join("a", 10, 2));
  CHECK_FALSE(w.push_price.has_value());
  CHECK_FALSE(w.observed_push_seconds.has_value());
}

TEST_CASE("byPeer finds live workers only, by their connection") {
  Membership m;
  Worker& a = m.admit("A", join("a"));
  CHECK(m.byPeer("A") == nullptr);
  a.rec.alive = true;
  CHECK(m.byPeer("A") == &a);
  CHECK(m.byPeer("B") == nullptr);
  CHECK(m.alive() == 1);
}

TEST_CASE("a gone worker is forgotten after the horizon unless its push is in the round") {
  Membership m;
  Worker& a = m.admit("A", join("a"));
  a.last_seen = 0.0;
  Worker& b = m.admit("B", join("b"));
  b.last_seen = 0.0;
  b.rec.pushed = true;
  m.forget(100.0, 600.0);
  CHECK(m.all().size() == 2);
  m.forget(601.0, 600.0);
  CHECK(m.all().size() == 1);
  CHECK(m.byName("b") != nullptr);
}

TEST_CASE("patience stretches while a push is awaited on a slow or unmeasured link") {
  PatienceContext c{5.0, 30.0, true, std::nullopt, 1000};
  Worker w;
  CHECK(patienceFor(w, c) == 5.0);  // no seat in the round
  w.plan.in_round = true;
  CHECK(patienceFor(w, c) == 30.0);  // unfitted link, no push yet: the round's deadline
  w.observed_push_seconds = 4.0;
  CHECK(patienceFor(w, c) == 8.0);  // twice its last push
  // A fitted link: 1000 floats in 1000-byte packets, 2 s a packet, a = 0.1 s.
  w.rec.link.set_b_seconds_per_packet(2.0);
  w.rec.link.set_b_stderr(0.01);
  w.rec.link.set_a_seconds(0.1);
  w.rec.link.set_packet_bytes(1000);
  CHECK(patienceFor(w, c) == doctest::Approx(2.0 * (0.1 + 2.0 * 4.0)));
  c.collecting = false;
  CHECK(patienceFor(w, c) == 5.0);
}

TEST_CASE("a tuner report no tuner makes is recorded as zeros") {
  WorkerRecord rec;
  wire::Push p;
  p.set_level(5);
  p.set_predicted_cost(1.5);
  p.set_predicted_improvement(-0.5);
  p.set_predicted_step(0.1);
  CHECK(takeReport(rec, p, 10));
  CHECK(rec.level == 5);
  CHECK(rec.predicted_improvement == -0.5);
  p.set_predicted_cost(std::numeric_limits<double>::infinity());
  CHECK_FALSE(takeReport(rec, p, 10));
  CHECK(rec.level == 0);
  CHECK(rec.predicted_cost == 0.0);
  p.set_predicted_cost(1.0);
  CHECK_FALSE(takeReport(rec, p, 4));  // a level beyond the model
}
