#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "common/allocation/allocator.hpp"

using namespace tern::allocation;

namespace {

std::vector<WorkerLoad> loads(const std::vector<double>& shares) {
  std::vector<WorkerLoad> out;
  for (double p : shares) out.push_back(WorkerLoad{p, 0.0, 0.0, std::nullopt});
  return out;
}

}  // namespace

TEST_CASE("every allocator's name parses to the method whose allocator has that name") {
  for (const std::string& name : allocatorNames()) {
    REQUIRE(methodNamed(name).has_value());
    CHECK(makeAllocator(*methodNamed(name))->name() == name);
    CHECK(makeAllocator(name)->name() == name);
  }
  CHECK_FALSE(methodNamed("dagc").has_value());
  CHECK_THROWS_AS(makeAllocator("dagc"), std::invalid_argument);
}

TEST_CASE("the key factor of a uniform allocation is one over the mean ratio") {
  // Phi = (sum p_i / sqrt(r)) / sqrt(r) = 1 / r whenever the shares sum to one.
  CHECK(keyFactor({0.5, 0.3, 0.2}, {0.01, 0.01, 0.01}) == doctest::Approx(100.0));
  CHECK(keyFactor({0.25, 0.25, 0.25, 0.25}, {0.001, 0.001, 0.001, 0.001}) ==
        doctest::Approx(1000.0));
}

TEST_CASE("the key factor matches its definition on an uneven allocation") {
  const double expected = (0.6 / std::sqrt(0.04) + 0.4 / std::sqrt(0.01)) / std::sqrt(0.01);
  CHECK(keyFactor({0.6, 0.4}, {0.04, 0.01}) == doctest::Approx(expected));
}

TEST_CASE("a worker with a zero ratio makes the key factor infinite") {
  CHECK(std::isinf(keyFactor({0.5, 0.5}, {0.1, 0.0})));
}

TEST_CASE("uniform gives every worker the mean ratio and caps of mean_ratio times d") {
  Budget budget;
  budget.mean_ratio = 0.01;
  const Allocation a = makeAllocator("uniform")->allocate(loads({0.5, 0.3, 0.2}), 10000, budget);
  REQUIRE(a.ratios.size() == 3);
  for (double r : a.ratios) CHECK(r == doctest::Approx(0.01));
  for (uint32_t k : a.caps) CHECK(k == 100);
  CHECK(a.thresholds.empty());
  CHECK(a.phi == doctest::Approx(100.0));
}

TEST_CASE("uniform derives the ratio from a bytes budget when one is set") {
  Budget budget;
  budget.mean_ratio = 0.5;                       // ignored: the bytes budget wins
  budget.bytes_per_round = 4 * 1000 * 8 * 0.02;  // n * d * bytes_per_coordinate * 2%
  const Allocation a =
      makeAllocator("uniform")->allocate(loads({0.25, 0.25, 0.25, 0.25}), 1000, budget);
  for (double r : a.ratios) CHECK(r == doctest::Approx(0.02));
  for (uint32_t k : a.caps) CHECK(k == 20);
}

TEST_CASE("uniform spreads rounding leftovers without exceeding the budget") {
  Budget budget;
  budget.mean_ratio = 0.01;
  // 3 workers * 0.01 * 7850 = 235.5 coordinates: caps 78/78/78 plus one leftover.
  const Allocation a = makeAllocator("uniform")->allocate(loads({0.5, 0.3, 0.2}), 7850, budget);
  uint32_t sum = 0;
  for (uint32_t k : a.caps) {
    CHECK(k >= 78);
    CHECK(k <= 79);
    sum += k;
  }
  CHECK(sum == 235);
}

TEST_CASE("uniform fills a threshold for every worker when a mean threshold is given") {
  Budget budget;
  budget.mean_threshold = 0.05;
  const Allocation a = makeAllocator("uniform")->allocate(loads({0.7, 0.3}), 100, budget);
  REQUIRE(a.thresholds.size() == 2);
  CHECK(a.thresholds[0] == doctest::Approx(0.05));
  CHECK(a.thresholds[1] == doctest::Approx(0.05));
}

TEST_CASE("makeAllocator knows every listed name and rejects others") {
  for (const std::string& name : allocatorNames()) CHECK(makeAllocator(name)->name() == name);
  CHECK_THROWS_AS(makeAllocator("dagc"), std::invalid_argument);
}

TEST_CASE("an allocator rejects a zero dimension and a negative share") {
  Budget budget;
  CHECK_THROWS_AS(makeAllocator("uniform")->allocate(loads({1.0}), 0, budget),
                  std::invalid_argument);
  CHECK_THROWS_AS(makeAllocator("uniform")->allocate(loads({1.2, -0.2}), 10, budget),
                  std::invalid_argument);
}
