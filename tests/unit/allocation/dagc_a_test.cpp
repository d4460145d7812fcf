#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "allocation_test_support.hpp"
#include "common/allocation/allocator.hpp"

using namespace tern::allocation;
using namespace tern::allocation::testing;

TEST_CASE("dagc-a thresholds follow Eq. 17 and keep lambda_bar as their harmonic mean") {
  Budget budget;
  budget.mean_threshold = 0.05;
  budget.mean_ratio = 0.01;
  const std::vector<double> p = {0.5, 0.3, 0.2};
  const Allocation a = makeAllocator("dagc-a")->allocate(loads(p), 1000, budget);
  REQUIRE(a.thresholds.size() == 3);
  // P = 0.5^(2/3) + 0.3^(2/3) + 0.2^(2/3) = 1.4200962; lambda_i = 0.05 * P / 3 * p_i^(-2/3).
  CHECK(a.thresholds[0] == doctest::Approx(0.05 * 1.4200962 / 3 / 0.6299605).epsilon(1e-6));
  CHECK(a.thresholds[1] == doctest::Approx(0.05 * 1.4200962 / 3 / 0.4481405).epsilon(1e-6));
  CHECK(a.thresholds[2] == doctest::Approx(0.05 * 1.4200962 / 3 / 0.3419952).epsilon(1e-6));
  double inverse_sum = 0.0;
  for (double t : a.thresholds) inverse_sum += 1.0 / t;
  CHECK(3.0 / inverse_sum == doctest::Approx(0.05));
  // More data, lower threshold: the big worker sends more.
  CHECK(a.thresholds[0] < a.thresholds[1]);
  CHECK(a.thresholds[1] < a.thresholds[2]);
  // The uniform caps bound what a threshold compressor may send.
  for (double r : a.ratios) CHECK(r == doctest::Approx(0.01));
  for (uint32_t k : a.caps) CHECK(k == 10);
}

TEST_CASE("dagc-a gives a worker without data an infinite threshold") {
  Budget budget;
  budget.mean_threshold = 0.05;
  const Allocation a = makeAllocator("dagc-a")->allocate(loads({0.6, 0.4, 0.0}), 1000, budget);
  CHECK(std::isinf(a.thresholds[2]));
  CHECK(std::isfinite(a.thresholds[0]));
}

TEST_CASE("dagc-a gives a worker with a tiny share a finite threshold") {
  // p^(2/3) as cbrt(p * p) underflows for p below about 1e-162: such a worker was treated as
  // one without data.
  Budget budget;
  budget.mean_threshold = 0.05;
  const Allocation a = makeAllocator("dagc-a")->allocate(loads({1.0, 1e-170}), 1000, budget);
  REQUIRE(std::isfinite(a.thresholds[1]));
  // Eq. 17: lambda_i proportional to p_i^(-2/3), so lambda_1 / lambda_0 = (1e-170)^(-2/3).
  CHECK(std::log10(a.thresholds[1] / a.thresholds[0]) == doctest::Approx(170.0 * 2.0 / 3.0));
}

TEST_CASE("dagc-a requires a mean threshold") {
  Budget budget;
  CHECK_THROWS_AS(makeAllocator("dagc-a")->allocate(loads({0.5, 0.5}), 10, budget),
                  std::invalid_argument);
}
