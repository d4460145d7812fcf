#include "common/allocation/budget.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "allocation_test_support.hpp"
#include "common/allocation/allocator.hpp"

using namespace tern::allocation;
using namespace tern::allocation::testing;

TEST_CASE("every method keeps the volume budget after clipping and rounding") {
  std::mt19937_64 rng(2024);
  std::uniform_int_distribution<int> size(1, 40);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = static_cast<std::size_t>(size(rng));
    // Concentrations from 0.05 (a few workers hold nearly everything) to 5 (balanced).
    std::vector<double> p = dirichlet(rng, std::vector<double>(n, 0.05 + 5 * unit(rng)));
    if (trial % 7 == 0 && n > 2) p[n - 1] = 0.0;  // a worker without data
    const uint32_t dim = static_cast<uint32_t>(std::pow(10.0, 1 + 5 * unit(rng)));
    Budget budget;
    budget.mean_ratio = std::pow(10.0, -4 + 4 * unit(rng));  // 1e-4 .. 1
    budget.mean_threshold = 0.01;
    if (trial % 3 == 0) {
      budget.bytes_per_round = n * dim * budget.bytes_per_coordinate * budget.mean_ratio;
      budget.mean_ratio = 0.5;  // must be ignored
    }
    const double total = std::min<double>(
        n, budget.bytes_per_round > 0
               ? budget.bytes_per_round / (double(dim) * budget.bytes_per_coordinate)
               : n * budget.mean_ratio);
    const uint64_t limit = static_cast<uint64_t>(std::floor(total * dim + 1e-6));
    for (const std::string& method : allocatorNames()) {
      CAPTURE(method);
      CAPTURE(trial);
      const Allocation a = makeAllocator(method)->allocate(loads(p), dim, budget);
      REQUIRE(a.ratios.size() == n);
      REQUIRE(a.caps.size() == n);
      for (std::size_t i = 0; i < n; ++i) {
        CHECK(a.ratios[i] > 0.0);
        CHECK(a.ratios[i] <= 1.0 + 1e-12);
        CHECK(a.caps[i] >= 1);
        CHECK(a.caps[i] <= dim);
      }
      CHECK(sum(a.ratios) == doctest::Approx(total).epsilon(1e-9));
      const uint64_t sent = sum(a.caps);
      // The one permitted overrun: the budget is below one coordinate per worker.
      if (limit < n) {
        CHECK(sent == n);
      } else {
        CHECK(sent <= limit);
        // Rounding loses less than one coordinate per worker.
        CHECK(sent + n > limit);
      }
    }
  }
}

TEST_CASE("caps lift tiny ratios to one coordinate and take the difference from the largest") {
  // dagc-r on (0.9, 0.05, 0.03, 0.02) with 1.5% of d = 100: 6 coordinates in all, split by the
  // closed form as 4.435, 0.646, 0.459, 0.459. Flooring and lifting to one gives 4 + 1 + 1 + 1
  // = 7, one too many, which comes off the largest cap.
  Budget budget;
  budget.mean_ratio = 0.015;
  const Allocation a =
      makeAllocator("dagc-r")->allocate(loads({0.9, 0.05, 0.03, 0.02}), 100, budget);
  CHECK(a.ratios[0] * 100 == doctest::Approx(4.435).epsilon(1e-3));
  CHECK(a.ratios[1] * 100 < 1.0);
  CHECK(a.caps == std::vector<uint32_t>{3, 1, 1, 1});
}

TEST_CASE("a worker on a stalled link gets one coordinate and leaves the others their budget") {
  // One coordinate of the fourth worker (10 s a packet, 181 coordinates to a packet) costs more
  // than the whole 50 ms budget: no plan can hold it. The others' caps must not be taken down
  // to one trying.
  Budget budget;
  budget.seconds_per_round = 0.05;
  const std::vector<double> b{0.001, 0.001, 0.002, 10.0};
  const uint32_t d = 100000;
  const Allocation a =
      makeAllocator("cost-aware")
          ->allocate(loads({0.3, 0.3, 0.3, 0.1}, b, {0.01, 0.01, 0.01, 0.01}), d, budget);
  REQUIRE(a.caps.size() == 4);
  CHECK(a.caps[3] == 1);
  double fast_seconds = 0.0;
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(a.caps[i] >= 1000);
    fast_seconds += b[i] * budget.bytes_per_coordinate / budget.packet_bytes * a.caps[i];
  }
  CHECK(fast_seconds <= budget.seconds_per_round * (1 + 1e-9));
  // A slow link that the budget can still hold is charged: the others get less.
  const std::vector<double> slow{0.001, 0.001, 0.002, 5.0};
  const Allocation held =
      makeAllocator("cost-aware")
          ->allocate(loads({0.3, 0.3, 0.3, 0.1}, slow, {0.01, 0.01, 0.01, 0.01}), d, budget);
  CHECK(held.caps[3] == 1);
  double all_seconds = 0.0;
  for (size_t i = 0; i < 4; ++i)
    all_seconds += slow[i] * budget.bytes_per_coordinate / budget.packet_bytes * held.caps[i];
  CHECK(all_seconds <= budget.seconds_per_round * (1 + 1e-9));
  CHECK(held.caps[0] < a.caps[0]);
}

TEST_CASE("rounding treats a ratio that is not a number as zero: caps stay in [1, d]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto caps = roundCapsToVolume({0.5, nan, 0.25}, 100, 0.75);
  // 50 + 1 + 25 is one over the 75 allowed: it comes off the largest.
  CHECK(caps == std::vector<uint32_t>{49, 1, 25});
}

TEST_CASE("extreme shares neither overflow nor underflow into caps outside [1, d]") {
  Budget budget;
  budget.mean_ratio = 0.01;
  for (const auto& shares :
       {std::vector<double>{1e308, 1e308}, std::vector<double>{1e200, 1.0, 1.0},
        std::vector<double>{1.0, 1e-300, 1e-300}}) {
    for (const char* method : {"uniform", "dagc-r", "dagc-opt"}) {
      CAPTURE(method);
      CAPTURE(shares[0]);
      const Allocation a = makeAllocator(method)->allocate(loads(shares), 1000, budget);
      REQUIRE(a.caps.size() == shares.size());
      for (size_t i = 0; i < shares.size(); ++i) {
        CHECK(a.caps[i] >= 1);
        CHECK(a.caps[i] <= 1000);
        CHECK(std::isfinite(a.ratios[i]));
      }
    }
  }
  // Two equal huge shares are two halves.
  const auto halves = normalisedShares(loads({1e308, 1e308}));
  CHECK(halves == std::vector<double>{0.5, 0.5});
}

TEST_CASE("rounding slack absorbs floating-point error, never whole coordinates of a large model") {
  // 0.03 * 1000 is 29.999999999999996 in double: still 30 coordinates.
  CHECK(roundCapsToVolume({0.03}, 1000, 0.03) == std::vector<uint32_t>{30});
  // Three halves of a 2^32 - 1 model: the caps must not exceed floor(1.5 d) together.
  const uint32_t d = 4294967295u;
  const auto caps = roundCapsToVolume({0.5, 0.5, 0.5}, d, 1.5);
  uint64_t total = 0;
  for (uint32_t k : caps) total += k;
  CHECK(total <= uint64_t(1.5 * double(d)));
  CHECK(total + 3 >= uint64_t(1.5 * double(d)));
}

TEST_CASE("a byte budget pays each push's fixed bytes before it buys coordinates") {
  // Every push costs bytes_per_push + bytes_per_coordinate * k; for every method the caps cost
  // at most the budget when priced that way, and a uniform plan spends nearly all of it.
  const uint32_t dim = 10000;
  for (double per_push : {0.0, 60.0, 125.0}) {
    for (double per_coordinate : {1.1, 4.6, 8.0}) {
      Budget budget;
      budget.bytes_per_round = 6000.0;
      budget.bytes_per_push = per_push;
      budget.bytes_per_coordinate = per_coordinate;
      const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
      for (const std::string method : {"uniform", "dagc-r", "dagc-opt"}) {
        CAPTURE(method);
        CAPTURE(per_push);
        CAPTURE(per_coordinate);
        const Allocation a = makeAllocator(method)->allocate(loads(p), dim, budget);
        double bytes = 0.0;
        for (uint32_t k : a.caps) bytes += per_push + per_coordinate * k;
        CHECK(bytes <= budget.bytes_per_round + 1e-6);
        // Rounding loses less than one coordinate a worker.
        if (method == std::string("uniform")) {
          CHECK(bytes > budget.bytes_per_round - 4 * per_coordinate - 1e-6);
        }
      }
    }
  }
  // Fixed bytes beyond the budget leave the floor of one coordinate each.
  Budget tight;
  tight.bytes_per_round = 100.0;
  tight.bytes_per_push = 60.0;
  const Allocation floor = makeAllocator("uniform")->allocate(loads({0.5, 0.5}), dim, tight);
  CHECK(floor.caps == std::vector<uint32_t>{1, 1});
}

TEST_CASE(
    "workers whose coordinates cost apart get caps that fit a byte budget at their own prices") {
  // Top-k spends about 5 bytes a coordinate, S+Q about 1.1. Worker 0 compresses with top-k and
  // holds most of the data, workers 1 and 2 with S+Q: priced at one mean of the three, worker 0's
  // larger cap is underpriced and the round overspends. Each worker's caps are priced here at
  // its own bytes_per_push + bytes_per_coordinate * k.
  const uint32_t dim = 400;
  const std::vector<double> shares = {0.8, 0.12, 0.08};
  const double per_push[3] = {40.0, 30.0, 30.0};
  const double per_coordinate[3] = {5.0, 1.1, 1.1};
  Budget budget;
  budget.bytes_per_round = 1200.0;
  budget.bytes_per_coordinate = (5.0 + 1.1 + 1.1) / 3.0;
  budget.bytes_per_push = 100.0 / 3.0;
  std::vector<WorkerLoad> workers = loads(shares);
  for (std::size_t i = 0; i < 3; ++i) {
    workers[i].price = PushPrice{per_push[i], per_coordinate[i]};
  }
  auto priced = [&](const std::vector<uint32_t>& caps) {
    double bytes = 0.0;
    for (std::size_t i = 0; i < 3; ++i) bytes += per_push[i] + per_coordinate[i] * caps[i];
    return bytes;
  };
  auto phi = [&](const std::vector<uint32_t>& caps) {
    std::vector<double> ratios;
    for (uint32_t k : caps) ratios.push_back(double(k) / dim);
    return keyFactor(shares, ratios);
  };
  // Brute force over the integer caps within the budget: the least key factor. Given caps 0 and
  // 1, Phi only falls as cap 2 grows, so cap 2 takes what the budget leaves.
  double best_phi = std::numeric_limits<double>::infinity();
  for (uint32_t a = 1; a <= dim; ++a) {
    for (uint32_t b = 1; b <= dim; ++b) {
      const double left = budget.bytes_per_round - priced({a, b, 0});
      if (left < per_coordinate[2]) break;
      const uint32_t c = std::min<uint32_t>(dim, uint32_t(left / per_coordinate[2]));
      best_phi = std::min(best_phi, phi({a, b, c}));
    }
  }
  for (const char* name : {"uniform", "dagc-r", "dagc-opt", "cost-aware"}) {
    const std::string method = name;
    CAPTURE(method);
    const Allocation plan = makeAllocator(method)->allocate(workers, dim, budget);
    REQUIRE(plan.caps.size() == 3);
    std::string caps;
    for (uint32_t k : plan.caps) caps += std::to_string(k) + " ";
    CAPTURE(caps);
    const double bytes = priced(plan.caps);
    CHECK(bytes <= budget.bytes_per_round + 1e-9);
    // Rounding leaves less than a coordinate of each worker unspent.
    CHECK(bytes > budget.bytes_per_round - 5.0 - 1.1 - 1.1);
    if (method == "uniform") {
      // One ratio for all: floor((budget - fixed bytes) / (5 + 1.1 + 1.1)) coordinates each, or
      // one more for a worker where the leftover still pays for it.
      const double each = std::floor((budget.bytes_per_round - 100.0) / (5.0 + 1.1 + 1.1));
      for (uint32_t k : plan.caps) {
        CHECK(k >= each);
        CHECK(k <= each + 1);
      }
    }
    if (method == "dagc-opt" || method == "cost-aware") {
      // The exact minimiser at these prices, up to the rounding of its caps.
      CHECK(phi(plan.caps) <= best_phi * 1.01);
    }
  }
}
