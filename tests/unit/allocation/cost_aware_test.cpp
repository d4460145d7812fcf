#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "allocation_test_support.hpp"
#include "common/allocation/allocator.hpp"
#include "common/allocation/link_costs.hpp"

using namespace tern::allocation;
using namespace tern::allocation::testing;

namespace {

// b_i from the cost model of docs/dagc.md (method): seconds per packet spread over the coordinates
// a packet carries.
double perCoordinate(double seconds_per_packet, const Budget& budget) {
  return seconds_per_packet * budget.bytes_per_coordinate / budget.packet_bytes;
}

}  // namespace

TEST_CASE("cost-aware with equal costs and a volume budget equals dagc-opt") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const std::size_t n = 2 + trial % 9;
    const std::vector<double> p = dirichlet(rng, std::vector<double>(n, 0.4));
    Budget budget;
    budget.mean_ratio = 0.002 * (1 + trial % 4);
    const auto equal = loads(p, std::vector<double>(n, 0.004), std::vector<double>(n, 0.01));
    const Allocation cost = makeAllocator("cost-aware")->allocate(equal, 50000, budget);
    const Allocation opt = makeAllocator("dagc-opt")->allocate(loads(p), 50000, budget);
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(cost.ratios[i] == doctest::Approx(opt.ratios[i]).epsilon(1e-12));
      CHECK(cost.caps[i] == opt.caps[i]);
    }
  }
}

TEST_CASE("cost-aware with equal costs and a seconds budget equals dagc-opt at that volume") {
  const std::vector<double> p = geometricShares(8, 100.0);
  Budget seconds;
  const double spp = 0.002;
  const uint32_t dim = 100000;
  const double b = perCoordinate(spp, seconds);
  seconds.seconds_per_round = 0.0037 * 8 * dim * b;  // the link time of a 0.37% mean ratio
  const Allocation cost =
      makeAllocator("cost-aware")->allocate(loads(p, std::vector<double>(8, spp)), dim, seconds);
  Budget volume;
  volume.mean_ratio = 0.0037;
  const Allocation opt = makeAllocator("dagc-opt")->allocate(loads(p), dim, volume);
  for (std::size_t i = 0; i < p.size(); ++i) {
    CHECK(cost.ratios[i] == doctest::Approx(opt.ratios[i]).epsilon(1e-9));
  }
  CHECK(cost.phi == doctest::Approx(opt.phi).epsilon(1e-9));
}

TEST_CASE("cost-aware gives the cheaper link more under a seconds budget") {
  Budget budget;
  const uint32_t dim = 100000;
  // Equal data, one link four times slower: same seconds as a uniform 1% plan.
  const std::vector<double> spp = {0.001, 0.004, 0.001, 0.004};
  double uniform_seconds = 0.0;
  for (double s : spp) uniform_seconds += 0.01 * dim * perCoordinate(s, budget);
  budget.seconds_per_round = uniform_seconds;
  const Allocation a =
      makeAllocator("cost-aware")->allocate(loads({0.25, 0.25, 0.25, 0.25}, spp), dim, budget);
  CHECK(a.ratios[0] > a.ratios[1]);
  CHECK(a.caps[0] > a.caps[1]);
  CHECK(a.ratios[0] == doctest::Approx(a.ratios[2]));
  double spent = 0.0;
  for (std::size_t i = 0; i < 4; ++i) spent += a.caps[i] * perCoordinate(spp[i], budget);
  CHECK(spent <= budget.seconds_per_round * (1 + 1e-12));
}

TEST_CASE("cost-aware minimises Phi under the seconds budget better than random allocations") {
  Budget budget;
  const uint32_t dim = 20000;
  const std::vector<double> p = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
  const std::vector<double> spp = {0.01, 0.001, 0.003, 0.0005, 0.002, 0.001};
  std::vector<double> w(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) w[i] = perCoordinate(spp[i], budget) * dim;
  budget.seconds_per_round = 0.005 * sum(w);
  const Allocation a = makeAllocator("cost-aware")->allocate(loads(p, spp), dim, budget);
  double spent = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) spent += w[i] * a.ratios[i];
  CHECK(spent == doctest::Approx(budget.seconds_per_round));
  // Against the independent brute force over floor and water level ...
  const double brute = bruteForceMinPhi(p, w, budget.seconds_per_round, 1500);
  CHECK(a.phi <= brute * (1 + 1e-9));
  CHECK(a.phi >= brute * (1 - 2e-3));
  // ... and against random allocations that spend the same seconds.
  std::mt19937_64 rng(99);
  int accepted = 0;
  while (accepted < 5000) {
    std::vector<double> x = dirichlet(rng, std::vector<double>(p.size(), 1.0));
    std::vector<double> delta(p.size());
    bool feasible = true;
    for (std::size_t i = 0; i < p.size(); ++i) {
      delta[i] = x[i] * budget.seconds_per_round / w[i];  // worker i spends share x_i of it
      feasible = feasible && delta[i] <= 1.0;
    }
    if (!feasible) continue;
    ++accepted;
    CHECK(a.phi <= phiReference(p, delta));
  }
}

TEST_CASE("cost-aware gives an unmeasured link the median cost of the measured ones") {
  Budget budget;
  budget.seconds_per_round = 2.0;
  const std::vector<double> p = {0.5, 0.3, 0.2};
  const Allocation unknown =
      makeAllocator("cost-aware")->allocate(loads(p, {0.001, 0.0, 0.003}), 100000, budget);
  const Allocation median =
      makeAllocator("cost-aware")->allocate(loads(p, {0.001, 0.002, 0.003}), 100000, budget);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(unknown.ratios[i] == doctest::Approx(median.ratios[i]).epsilon(1e-12));
  }
}

TEST_CASE("cost-aware never lets an upload exceed the deadline") {
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 100; ++trial) {
    const std::size_t n = 2 + trial % 15;
    const std::vector<double> p = dirichlet(rng, std::vector<double>(n, 0.3 + unit(rng)));
    std::vector<double> spp(n);
    std::vector<double> fixed(n);
    for (std::size_t i = 0; i < n; ++i) {
      spp[i] = 0.0002 * std::pow(50.0, unit(rng));  // 1.4 Mbit/s .. 58 Mbit/s
      fixed[i] = 0.02 * unit(rng);
    }
    Budget budget;
    const uint32_t dim = 200000;
    budget.mean_ratio = 0.01;
    if (trial % 2 == 1) {
      budget.mean_ratio = 0.0;
      budget.seconds_per_round = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        budget.seconds_per_round += 0.01 * dim * perCoordinate(spp[i], budget);
      }
    }
    budget.deadline_seconds = 0.03 + 0.3 * unit(rng);
    const Allocation a = makeAllocator("cost-aware")->allocate(loads(p, spp, fixed), dim, budget);
    double seconds = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double b = perCoordinate(spp[i], budget);
      seconds += b * a.caps[i];
      if (fixed[i] + b <= budget.deadline_seconds) {
        CHECK(fixed[i] + b * a.caps[i] <= budget.deadline_seconds * (1 + 1e-9));
      } else {
        CHECK(a.caps[i] == 1);  // cannot meet it; sends the minimum
      }
    }
    if (budget.seconds_per_round > 0) {
      CHECK(seconds <= budget.seconds_per_round * (1 + 1e-9));
    } else {
      CHECK(sum(a.caps) <= static_cast<uint64_t>(std::floor(n * 0.01 * dim + 1e-6)));
    }
  }
}

TEST_CASE("a tight deadline moves coordinates from the slow link to the fast one") {
  Budget budget;
  budget.mean_ratio = 0.01;
  const uint32_t dim = 100000;  // 1000 coordinates per worker under uniform
  const std::vector<double> spp = {0.001, 0.01};
  // The slow worker can send 400 coordinates before the deadline.
  budget.deadline_seconds = 400 * perCoordinate(0.01, budget);
  const Allocation free = makeAllocator("dagc-opt")->allocate(loads({0.5, 0.5}), dim, budget);
  const Allocation a = makeAllocator("cost-aware")->allocate(loads({0.5, 0.5}, spp), dim, budget);
  CHECK(free.caps[1] == 1000);
  CHECK(a.caps[1] == 400);
  CHECK(a.caps[0] == 1600);
}

namespace {

// Phi times the modelled round time (overhead + slowest a_i + b_i * k_i), computed from scratch.
double roundCostOf(const Allocation& a, const std::vector<double>& p,
                   const std::vector<double>& spp, const std::vector<double>& fixed,
                   const Budget& budget) {
  double slowest = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    slowest = std::max(slowest, fixed[i] + perCoordinate(spp[i], budget) * a.caps[i]);
  }
  return phiReference(p, a.ratios) * (budget.round_overhead_seconds + slowest);
}

}  // namespace

TEST_CASE("with a round overhead cost-aware picks the deadline minimising Phi times round time") {
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 12; ++trial) {
    const std::size_t n = 3 + trial % 8;
    const std::vector<double> p = geometricShares(n, std::pow(1000.0, unit(rng)));
    std::vector<double> spp(n);
    std::vector<double> fixed(n);
    for (std::size_t i = 0; i < n; ++i) {
      spp[i] = i % 2 == 0 ? 0.012 : 0.0006;  // 1 and 20 Mbit/s
      fixed[i] = 0.005 + 0.002 * unit(rng);
    }
    Budget budget;
    budget.mean_ratio = trial % 2 == 0 ? 0.01 : 0.001;
    budget.round_overhead_seconds = 0.002 + 0.05 * unit(rng);
    const uint32_t dim = 7850;
    const auto workers = loads(p, spp, fixed);
    const Allocation chosen = makeAllocator("cost-aware")->allocate(workers, dim, budget);
    const double cost = roundCostOf(chosen, p, spp, fixed, budget);
    // Never worse than ignoring the links (the unconstrained plan is dagc-opt) ...
    Budget free = budget;
    free.round_overhead_seconds = 0.0;
    const Allocation opt = makeAllocator("dagc-opt")->allocate(loads(p), dim, free);
    CHECK(cost <= roundCostOf(opt, p, spp, fixed, budget) * (1 + 1e-12));
    // ... the budget holds ...
    CHECK(sum(chosen.caps) <=
          static_cast<uint64_t>(std::floor(n * budget.mean_ratio * dim + 1e-6)));
    // ... and a brute-force scan over 3000 fixed deadlines finds nothing clearly better.
    double brute = cost;
    for (int j = 0; j <= 3000; ++j) {
      Budget fixed_deadline = free;
      fixed_deadline.deadline_seconds = 0.004 * std::pow(2000.0, j / 3000.0);
      const Allocation a = makeAllocator("cost-aware")->allocate(workers, dim, fixed_deadline);
      brute = std::min(brute, roundCostOf(a, p, spp, fixed, budget));
    }
    CHECK(cost <= brute * (1 + 1e-3));
  }
}

TEST_CASE("a small round overhead takes coordinates off a big worker on a slow link") {
  const std::vector<double> p = {0.6, 0.2, 0.1, 0.1};
  const std::vector<double> spp = {0.012, 0.0006, 0.0006, 0.012};
  const std::vector<double> fixed(4, 0.005);
  Budget budget;
  budget.mean_ratio = 0.01;
  const uint32_t dim = 7850;
  const Allocation opt = makeAllocator("dagc-opt")->allocate(loads(p), dim, budget);
  budget.round_overhead_seconds = 0.015;
  const Allocation a = makeAllocator("cost-aware")->allocate(loads(p, spp, fixed), dim, budget);
  CHECK(a.caps[0] < opt.caps[0]);
  CHECK(a.caps[1] > opt.caps[1]);
  CHECK(roundCostOf(a, p, spp, fixed, budget) < roundCostOf(opt, p, spp, fixed, budget));
}

TEST_CASE("a fixed cost clamped to zero takes the median of the measured ones") {
  Budget budget;
  budget.mean_ratio = 0.01;
  budget.round_overhead_seconds = 0.015;
  const std::vector<double> p = {0.5, 0.3, 0.2};
  const std::vector<double> spp = {0.012, 0.0006, 0.012};
  const Allocation clamped =
      makeAllocator("cost-aware")->allocate(loads(p, spp, {0.0, 0.009, 0.011}), 7850, budget);
  const Allocation median =
      makeAllocator("cost-aware")->allocate(loads(p, spp, {0.010, 0.009, 0.011}), 7850, budget);
  for (std::size_t i = 0; i < 3; ++i) CHECK(clamped.caps[i] == median.caps[i]);
}

namespace {

// The largest k with push + per_coordinate * k <= m * packet bytes (1448), counted up one at a
// time; at least m (a push larger than its packets still sends one coordinate a packet).
uint32_t holdsByCounting(double push, double per_coordinate, uint32_t m) {
  uint32_t k = 0;
  while (push + per_coordinate * (k + 1) <= 1448.0 * m) ++k;
  return std::max(k, m);
}

// The packet-priced problem by exhaustion: every vector of packet counts m_i in [1, M] that keeps
// sum_i spp_i * m_i <= seconds (and a_i + spp_i * m_i <= deadline when one is set), caps
// min(d, what m_i packets hold at worker i's push and coordinate bytes); the smallest Phi of them.
double bruteForcePacketPhi(const std::vector<double>& p, const std::vector<double>& spp,
                           const std::vector<double>& fixed, uint32_t dim,
                           const std::vector<double>& push,
                           const std::vector<double>& per_coordinate, double seconds,
                           double deadline) {
  const std::size_t n = p.size();
  std::vector<std::vector<uint32_t>> holds(n);  // holds[i][m - 1]: what m packets hold
  for (std::size_t i = 0; i < n; ++i) {
    for (uint32_t m = 1; holds[i].empty() || holds[i].back() < dim; ++m) {
      holds[i].push_back(holdsByCounting(push[i], per_coordinate[i], m));
    }
  }
  std::vector<uint32_t> m(n, 1);
  double best = INFINITY;
  while (true) {
    double spent = 0.0;
    bool ok = true;
    std::vector<double> delta(n);
    for (std::size_t i = 0; i < n; ++i) {
      spent += spp[i] * m[i];
      if (deadline > 0 && fixed[i] + spp[i] * m[i] > deadline * (1 + 1e-12) && m[i] > 1) ok = false;
      delta[i] = std::min<double>(dim, holds[i][m[i] - 1]) / dim;
    }
    if (ok && spent <= seconds * (1 + 1e-12)) best = std::min(best, phiReference(p, delta));
    std::size_t i = 0;
    while (i < n && m[i] == holds[i].size()) m[i++] = 1;
    if (i == n) break;
    ++m[i];
  }
  return best;
}

// Packets that k coordinates take beside the push's fixed bytes, counted up one at a time.
double packetsByCounting(double push, double per_coordinate, uint32_t k) {
  uint32_t m = 1;
  while (holdsByCounting(push, per_coordinate, m) < k) ++m;
  return m;
}

}  // namespace

namespace {

// Random links for n workers: 0.5 .. 12.5 ms per packet, 1 .. 11 ms fixed; returns the seconds
// of one packet each.
double randomLinks(std::mt19937_64& rng, std::size_t n, std::vector<double>& spp,
                   std::vector<double>& fixed) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  spp.resize(n);
  fixed.resize(n);
  double one_each = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    spp[i] = 0.0005 * std::pow(25.0, unit(rng));
    fixed[i] = 0.001 + 0.01 * unit(rng);
    one_each += spp[i];
  }
  return one_each;
}

}  // namespace

TEST_CASE("whole packets: caps fill packets, keep the seconds budget, and match exhaustion") {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Budget budget;
  budget.whole_packets = true;
  const uint32_t per_packet = 1448 / 8;       // 181 coordinates of 8 bytes in a 1448-byte packet
  const uint32_t dim = per_packet * 11 + 37;  // 12 packets, the last one partly filled
  int exact = 0;
  double worst = 1.0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 2 + trial % 3;
    const std::vector<double> p = dirichlet(rng, std::vector<double>(n, 0.5));
    std::vector<double> spp, fixed;
    const double one_each = randomLinks(rng, n, spp, fixed);
    budget.seconds_per_round = one_each * (1.0 + 4.0 * unit(rng));
    budget.deadline_seconds = trial % 2 == 0 ? 0.0 : 0.02 + 0.05 * unit(rng);
    const Allocation a = makeAllocator("cost-aware")->allocate(loads(p, spp, fixed), dim, budget);
    double spent = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const uint32_t k = a.caps[i];
      CAPTURE(k);
      CHECK((k % per_packet == 0 || k == dim));  // every packet paid for is full
      CHECK(k >= per_packet);                    // at least one packet
      const double packets = std::ceil(double(k) / per_packet);
      spent += spp[i] * packets;
      CHECK(a.ratios[i] == doctest::Approx(double(k) / dim));  // the ratio is what it sends
      if (budget.deadline_seconds > 0 && packets > 1) {
        CHECK(fixed[i] + spp[i] * packets <= budget.deadline_seconds * (1 + 1e-9));
      }
    }
    CHECK(spent <= budget.seconds_per_round * (1 + 1e-9));
    const double brute = bruteForcePacketPhi(p, spp, fixed, dim, std::vector<double>(n, 0.0),
                                             std::vector<double>(n, 8.0), budget.seconds_per_round,
                                             budget.deadline_seconds);
    CHECK(a.phi == doctest::Approx(phiReference(p, a.ratios)));
    CHECK(a.phi >= brute * (1 - 1e-9));
    CHECK(a.phi <= brute * 1.05);
    if (a.phi <= brute * (1 + 1e-9)) ++exact;
    worst = std::max(worst, a.phi / brute);
  }
  MESSAGE("whole-packet plans at the exhaustive optimum: " << exact << " of 200, worst " << worst
                                                           << "x");
  CHECK(exact >= 190);
}

TEST_CASE("whole packets: each worker's packets hold what fits at its own price") {
  // Workers priced apart: one at 5 bytes a coordinate and 150 a push (top-k), the others at
  // 1.1 and 40 (S+Q). Each cap fills the packets that worker pays for at its own price (the
  // push's fixed bytes travel once, in the first packet), within the seconds budget, and the
  // plan matches exhaustion. Packed at the dearest price an S+Q packet carried 259 coordinates
  // where 1280 fit; priced as m times one packet's room, two top-k packets carried 518 where
  // 549 fit.
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Budget budget;
  budget.whole_packets = true;
  budget.bytes_per_coordinate = 5.0;
  budget.bytes_per_push = 150.0;
  const uint32_t dim = 4000;
  int exact = 0;
  int several = 0;  // caps of more than one packet
  for (int trial = 0; trial < 120; ++trial) {
    const std::size_t n = 2 + trial % 2;
    const std::vector<double> p = dirichlet(rng, std::vector<double>(n, 0.5));
    std::vector<double> spp, fixed;
    const double one_each = randomLinks(rng, n, spp, fixed);
    std::vector<WorkerLoad> workers = loads(p, spp, fixed);
    std::vector<double> push(n), per_coordinate(n);
    for (std::size_t i = 0; i < n; ++i) {
      const bool sq = i > 0;
      per_coordinate[i] = sq ? 1.1 : 5.0;
      push[i] = sq ? 40.0 : 150.0;
      workers[i].price = PushPrice{push[i], per_coordinate[i]};
    }
    REQUIRE(holdsByCounting(push[0], per_coordinate[0], 1) == 259);
    REQUIRE(holdsByCounting(push[0], per_coordinate[0], 2) == 549);
    REQUIRE(holdsByCounting(push[1], per_coordinate[1], 1) == 1280);
    budget.seconds_per_round = one_each * (1.0 + 3.0 * unit(rng));
    const Allocation a = makeAllocator("cost-aware")->allocate(workers, dim, budget);
    double spent = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const uint32_t k = a.caps[i];
      CAPTURE(i);
      CAPTURE(k);
      const double packets = packetsByCounting(push[i], per_coordinate[i], k);
      // Full: one more coordinate would need another packet (or the cap is the whole model).
      CHECK((k == dim || packetsByCounting(push[i], per_coordinate[i], k + 1) > packets));
      CHECK(k >= holdsByCounting(push[i], per_coordinate[i], 1));
      if (packets > 1) ++several;
      spent += spp[i] * packets;
    }
    CHECK(spent <= budget.seconds_per_round * (1 + 1e-9));
    const double brute = bruteForcePacketPhi(p, spp, fixed, dim, push, per_coordinate,
                                             budget.seconds_per_round, 0.0);
    CHECK(a.phi >= brute * (1 - 1e-9));
    CHECK(a.phi <= brute * 1.10);
    if (a.phi <= brute * (1 + 1e-9)) ++exact;
  }
  MESSAGE("per-worker packings at the exhaustive optimum: " << exact << " of 120, " << several
                                                            << " caps of several packets");
  CHECK(several >= 40);
  CHECK(exact >= 100);
}

TEST_CASE("what m whole packets hold and how many k coordinates take, against counting") {
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    Budget budget;
    budget.bytes_per_push = trial % 7 == 0 ? 1448.0 + 600.0 * unit(rng) : 300.0 * unit(rng);
    budget.bytes_per_coordinate = trial % 11 == 0 ? 1500.0 : 0.3 + 15.0 * unit(rng);
    if (trial % 13 == 0) budget.bytes_per_coordinate = 4.0;  // lands exactly on packet ends
    if (trial % 13 == 0) budget.bytes_per_push = 8.0;
    const Packing packing = wholePackets(budget);
    CAPTURE(budget.bytes_per_push);
    CAPTURE(budget.bytes_per_coordinate);
    for (uint32_t m = 1; m <= 6; ++m) {
      CHECK(packing.coordinates(m) ==
            holdsByCounting(budget.bytes_per_push, budget.bytes_per_coordinate, m));
    }
    for (uint32_t k = 1; k <= 2000; k += 1 + k / 50) {
      CAPTURE(k);
      CHECK(double(packing.unitsFor(k)) ==
            packetsByCounting(budget.bytes_per_push, budget.bytes_per_coordinate, k));
    }
  }
  // Priced by the coordinate a unit is one coordinate.
  const Packing coordinates;
  CHECK(coordinates.coordinates(17) == 17);
  CHECK(coordinates.unitsFor(17) == 17);
  CHECK(coordinates.unitsFor(0) == 0);
}

TEST_CASE("whole packets on equal links fill one packet each when the budget buys one each") {
  Budget budget;
  budget.whole_packets = true;
  budget.seconds_per_round = 4 * 0.0116;  // four 1 Mbit/s links, one packet each
  const std::vector<double> p = {0.7, 0.2, 0.05, 0.05};
  const Allocation a =
      makeAllocator("cost-aware")->allocate(loads(p, std::vector<double>(4, 0.0116)), 7850, budget);
  for (uint32_t k : a.caps) CHECK(k == 181);
  // Priced per coordinate, the same seconds buy the same volume spread as dagc-opt does it.
  budget.whole_packets = false;
  const Allocation linear =
      makeAllocator("cost-aware")->allocate(loads(p, std::vector<double>(4, 0.0116)), 7850, budget);
  CHECK(sum(linear.caps) <= 4 * 181);
  CHECK(linear.caps[3] < 181);
}

TEST_CASE("a packet holds the most coordinates that fit beside the push's fixed bytes") {
  // Brute force: the largest k with bytes_per_push + bytes_per_coordinate * k <= packet_bytes.
  for (double per_push : {0.0, 57.0, 125.0, 1448.0, 2000.0}) {
    for (double per_coordinate : {0.74, 1.1, 4.6, 5.0, 8.0, 14.0}) {
      Budget budget;
      budget.bytes_per_push = per_push;
      budget.bytes_per_coordinate = per_coordinate;
      uint32_t best = 0;
      for (uint32_t k = 1; k <= 4000; ++k) {
        if (per_push + per_coordinate * k <= budget.packet_bytes) best = k;
      }
      CAPTURE(per_push);
      CAPTURE(per_coordinate);
      CHECK(wholePackets(budget).coordinates(1) == std::max<uint32_t>(1, best));
    }
  }
}

namespace {

// Pushes of 150 bytes plus 5 a coordinate under a 50 ms link-seconds budget, and a link of
// 11.6 ms a 1448-byte packet and 10 ms fixed.
Budget topKSecondsBudget() {
  Budget budget;
  budget.bytes_per_push = 150.0;
  budget.bytes_per_coordinate = 5.0;
  budget.seconds_per_round = 0.05;
  return budget;
}

WorkerLoad oneMbitLink() {
  WorkerLoad w;
  w.share = 1.0;
  w.seconds_per_packet = 0.0116;
  w.seconds_fixed = 0.010;
  return w;
}

}  // namespace

TEST_CASE(
    "an upload's fixed time includes its push's fixed bytes, unless whole packets hold them") {
  // a + b * bytes_per_push / packet_bytes, written out: 10 ms + 11.6 ms * 150 / 1448.
  Budget budget = topKSecondsBudget();
  const WorkerLoad w = oneMbitLink();
  const LinkCosts per_coordinate = linkCosts({w}, budget);
  CHECK(per_coordinate.fixed[0] == doctest::Approx(0.010 + 0.0116 * 150.0 / 1448.0));
  CHECK(per_coordinate.per_coordinate[0] == doctest::Approx(0.0116 * 5.0 / 1448.0));
  budget.whole_packets = true;
  const LinkCosts whole = linkCosts({w}, budget);
  CHECK(whole.fixed[0] == doctest::Approx(0.010));
  REQUIRE(whole.packing.size() == 1);
  CHECK(whole.packing[0].coordinates(1) == (1448 - 150) / 5);
  CHECK(whole.packing[0].coordinates(3) == (3 * 1448 - 150) / 5);
}

TEST_CASE("fixed bytes of more than a packet are fixed time, and caps still fit the packets paid") {
  // A push of 1500 fixed bytes at 4 bytes a coordinate: its first packet holds fixed bytes only,
  // so every upload takes it whatever the cap (fixed time, like a_i), and the packets the budget
  // buys are counted from the one the first coordinate is in. On the wire k coordinates take
  // ceil((1500 + 4 k) / 1448) packets: the fixed one and those the budget paid for.
  Budget budget;
  budget.whole_packets = true;
  budget.bytes_per_push = 1500.0;
  budget.bytes_per_coordinate = 4.0;
  budget.seconds_per_round = 0.02;
  WorkerLoad w = oneMbitLink();
  w.seconds_per_packet = 0.01;
  const LinkCosts links = linkCosts({w, w}, budget);
  CHECK(links.fixed[0] == doctest::Approx(0.010 + 0.01));
  CHECK(links.packing[0].coordinates(1) == (2 * 1448 - 1500) / 4);
  const Allocation a = makeAllocator("cost-aware")->allocate({w, w}, 5000, budget);
  for (std::size_t i = 0; i < 2; ++i) {
    const uint32_t k = a.caps[i];
    CAPTURE(k);
    const double wire_packets = std::ceil((1500.0 + 4.0 * k) / 1448.0);
    // One packet of the budget each (0.02 s for two), the fixed packet besides, and full.
    CHECK(wire_packets == 2.0);
    CHECK(std::ceil((1500.0 + 4.0 * (k + 1)) / 1448.0) == 3.0);
    CHECK(links.uploadSeconds(i, k) == doctest::Approx(0.010 + 0.01 * wire_packets));
  }
}

TEST_CASE(
    "a cap within a round's left seconds: the most whole units that fit, charged as planned") {
  // Whole packets of (1448 - 150) / 5 = 259 coordinates at 11.6 ms each; a 50 ms budget.
  Budget budget = topKSecondsBudget();
  budget.whole_packets = true;
  const WorkerLoad fast = oneMbitLink();
  WorkerLoad stalled = fast;
  stalled.seconds_per_packet = 0.2;  // one packet alone is past the whole budget
  const LinkCosts links = linkCosts({fast, stalled}, budget);
  REQUIRE(links.packing.size() == 2);
  CHECK(links.packing[0].coordinates(1) == 259);
  CHECK(links.packing[0].coordinates(2) == 549);  // the push's 150 bytes travel once
  // Charged by the packets a cap takes, the fixed cost aside; a stalled link is not charged.
  CHECK(chargedSeconds(links.per_unit[0], links.packing[0], 1, 0.05) == doctest::Approx(0.0116));
  CHECK(chargedSeconds(links.per_unit[0], links.packing[0], 259, 0.05) == doctest::Approx(0.0116));
  CHECK(chargedSeconds(links.per_unit[0], links.packing[0], 260, 0.05) == doctest::Approx(0.0232));
  CHECK(chargedSeconds(links.per_unit[0], links.packing[0], 549, 0.05) == doctest::Approx(0.0232));
  CHECK(chargedSeconds(links.per_unit[0], links.packing[0], 550, 0.05) == doctest::Approx(0.0348));
  CHECK(chargedSeconds(links.per_unit[1], links.packing[1], 1000, 0.05) == 0.0);
  // Brute force: the largest k <= wanted whose packets fit in the room and are full (one more
  // coordinate would need another packet), unless it is `wanted` itself.
  for (double room : {0.0, 0.011, 0.0116, 0.0232, 0.03, 0.05}) {
    for (uint32_t wanted : {1u, 100u, 259u, 300u, 549u, 800u, 5000u}) {
      CAPTURE(room);
      CAPTURE(wanted);
      uint32_t best = 0;
      for (uint32_t k = 1; k <= wanted; ++k) {
        const double packets = std::ceil((150.0 + 5.0 * k) / 1448.0);
        const bool full = std::ceil((150.0 + 5.0 * (k + 1)) / 1448.0) > packets || k == wanted;
        if (full && packets * 0.0116 <= room * (1 + 1e-9)) best = k;
      }
      CHECK(capWithin(links.per_unit[0], links.packing[0], wanted, room, 0.05) == best);
    }
  }
  CHECK(capWithin(links.per_unit[1], links.packing[1], 800, 0.0, 0.05) == 259);
  CHECK(capWithin(links.per_unit[1], links.packing[1], 100, 0.0, 0.05) == 100);
}
