#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

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
