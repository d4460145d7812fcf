// The coordinator core pricing each worker's pushes: links compared by bytes whatever their
// packet size, a worker's measured price kept for its process across a re-join and a restart
// from the checkpoint, and a checkpoint holding an impossible price refused.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "common/compression/compressor.hpp"
#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

TEST_CASE("cost-aware prices each worker's link by bytes, whatever packet size it fits b for") {
  // Two workers with the same data and the same link, 1 ms per 1448 bytes: one fits b per
  // 1448-byte packet, the other per 9000-byte packet (6.2 times the seconds per packet). Priced
  // by bytes they are alike and get the same cap.
  Harness h;
  h.settings.model.features = 3000;  // d = 6002: the seconds budget binds
  h.settings.allocation.method = tern::allocation::Method::kCostAware;
  h.settings.allocation.reallocate_every = 1;
  h.settings.allocation.budget.seconds_per_round = 0.01;
  h.withTimers(1000.0, 1000.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  const uint32_t b = idOf(h.join("B", "b", 100), "B");
  const size_t d = h.core->parameters().size();
  auto withLink = [&](uint32_t id, uint64_t round, uint32_t packet_bytes) {
    auto m = h.push(id, round, std::vector<float>(d, 0.01f));
    auto* l = m.envelope.mutable_push()->mutable_link();
    l->set_a_seconds(0.002);
    l->set_b_seconds_per_packet(0.001 * packet_bytes / 1448.0);
    l->set_packet_bytes(packet_bytes);
    l->set_samples(20);
    l->set_r2(0.99);
    return m;
  };
  for (uint64_t r = 0; r < 2; ++r) {
    h.core->onMessage("A", withLink(a, r, 1448), 50, h.now);
    h.core->onMessage("B", withLink(b, r, 9000), 50, h.now);
    REQUIRE(h.core->round() == r + 1);
  }
  const auto ca = recordOf(*h.core, a).cap, cb = recordOf(*h.core, b).cap;
  CHECK(ca > 100);
  CHECK(ca < d);
  CHECK(std::abs(int64_t(ca) - int64_t(cb)) <= 1);
}

TEST_CASE("a worker restarted under its name is priced afresh, a reconnect keeps its price") {
  // a sends top-k pushes (index and value: dearer per coordinate than b's dense fp32). After a
  // leaves and joins again, a reconnect of the same process (same instance) is still priced at
  // a's own measure, a new process (another instance, maybe another compressor) at the mean of
  // all pushes: with a's dearer price the budget buys fewer coordinates.
  auto capAfterRejoin = [](uint64_t rejoin_instance) {
    Harness h;
    h.settings.model.features = 300;
    h.settings.min_workers = 1;
    // Less than b's whole gradient: b alone spends all of it, so a re-joining sits round 2 out.
    h.settings.allocation.budget.bytes_per_round = 2000.0;
    h.withTimers(1000.0, 1000.0);
    const uint32_t a = idOf(h.join("A", "a", 100, 5), "A");
    const uint32_t b = idOf(h.join("B", "b", 100), "B");
    const size_t d = h.core->parameters().size();
    Rng rng(3);
    auto topk = [&](uint64_t round) {
      Message m = h.push(a, round, ramp(d, 0.1f, 0.01f));
      m.payload =
          compression::makeCompressor({"topk"})->compress(ramp(d, 0.1f, 0.01f), 40, rng).bytes;
      return m;
    };
    h.core->onMessage("A", topk(0), 50, h.now);
    h.core->onMessage("B", h.push(b, 0, ramp(d, 0.2f, 0.01f)), 50, h.now);
    REQUIRE(h.core->round() == 1);
    h.core->onMessage("A", h.leave(), 10, h.now);
    h.core->onMessage("B", h.push(b, 1, ramp(d, 0.2f, 0.01f)), 50, h.now);
    REQUIRE(h.core->round() == 2);
    h.join("A", "a", 100, rejoin_instance);
    const auto out = h.core->onMessage("B", h.push(b, 2, ramp(d, 0.2f, 0.01f)), 50, h.now);
    REQUIRE(h.core->round() == 3);
    const auto caps = roundStartCaps(out, 3);
    REQUIRE(caps.count("A") == 1);
    return caps.at("A");
  };
  CHECK(capAfterRejoin(6) > capAfterRejoin(5));
}

TEST_CASE("a restarted coordinator keeps what each worker's pushes cost, for the same process") {
  // a sends top-k pushes (dearer per coordinate than b's dense fp32) under a byte budget. After
  // two rounds the coordinator restarts from its checkpoint: a re-joining from the same process
  // gets the cap the original planned for round 2 (its price kept), a new process under a's name
  // one priced afresh at the mean of all pushes (cheaper: more coordinates). Before, every
  // restart forgot the prices and the first rounds after it overspent the budget.
  Harness h;
  h.settings.model.features = 300;
  h.settings.allocation.budget.bytes_per_round = 2000.0;
  h.withTimers(1000.0, 1000.0);
  const uint32_t a = idOf(h.join("A", "a", 100, 5), "A");
  const uint32_t b = idOf(h.join("B", "b", 100, 9), "B");
  const size_t d = h.core->parameters().size();
  Rng rng(3);
  std::vector<Outgoing> last;
  for (uint64_t r = 0; r < 2; ++r) {
    Message m = h.push(a, r, ramp(d, 0.1f, 0.01f));
    m.payload =
        compression::makeCompressor({"topk"})->compress(ramp(d, 0.1f, 0.01f), 40, rng).bytes;
    h.core->onMessage("A", m, 50, h.now);
    last = h.core->onMessage("B", h.push(b, r, ramp(d, 0.2f, 0.01f)), 50, h.now);
    REQUIRE(h.core->round() == r + 1);
  }
  const auto original = roundStartCaps(last, 2);
  REQUIRE(original.count("A") == 1);
  REQUIRE(original.count("B") == 1);
  const std::string bytes = h.core->checkpoint();

  auto capsAfterRestart = [&](uint64_t a_instance) {
    auto restored = testing::DrivenCoordinator::restore(
        h.settings, ml::makeModel(h.settings.model), nullptr, 43, [&h] { return h.now; }, bytes);
    auto join = [&](const std::string& peer, const std::string& name, uint64_t instance) {
      Message m;
      m.envelope = makeEnvelope();
      m.envelope.mutable_join()->set_worker_name(name);
      m.envelope.mutable_join()->set_sample_count(100);
      m.envelope.mutable_join()->set_instance(instance);
      return restored->onMessage(peer, m, 10, h.now);
    };
    std::vector<Outgoing> out = join("A", "a", a_instance);
    append(out, join("B", "b", 9));
    return roundStartCaps(out, 2);
  };
  const auto same = capsAfterRestart(5);
  REQUIRE(same.count("A") == 1);
  CHECK(same.at("A") == original.at("A"));
  CHECK(same.at("B") == original.at("B"));
  const auto other = capsAfterRestart(6);
  REQUIRE(other.count("A") == 1);
  CHECK(other.at("A") > original.at("A"));
}

TEST_CASE("a checkpoint holding an impossible push price is refused with a reason") {
  Harness h;
  const auto [a, b] = h.joinAB();
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, 0, ramp(d, 0.1f, 0.01f)), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, ramp(d, 0.2f, 0.01f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  wire::Checkpoint c;
  REQUIRE(c.ParseFromString(server::unsealCheckpoint(h.core->checkpoint())));
  REQUIRE(c.has_push_price());
  REQUIRE(c.workers_size() == 2);
  REQUIRE(c.workers(0).has_push_price());
  auto restoreFrom = [&](const wire::Checkpoint& damaged) {
    testing::DrivenCoordinator::restore(
        h.settings, ml::makeModel(h.settings.model), nullptr, 43, [&h] { return h.now; },
        server::sealCheckpoint(damaged.SerializeAsString()));
  };
  CHECK_NOTHROW(restoreFrom(c));
  for (double bad : {std::nan(""), -1.0, 0.0, double(INFINITY)}) {
    CAPTURE(bad);
    wire::Checkpoint per_worker = c;
    per_worker.mutable_workers(0)->mutable_push_price()->set_bytes_per_coordinate(bad);
    CHECK_THROWS_WITH_AS(restoreFrom(per_worker), doctest::Contains("invalid push price"),
                         std::runtime_error);
    wire::Checkpoint mean = c;
    mean.mutable_push_price()->set_fixed_bytes(bad == 0.0 ? -0.5 : bad);
    CHECK_THROWS_WITH_AS(restoreFrom(mean), doctest::Contains("invalid push price"),
                         std::runtime_error);
  }
}
