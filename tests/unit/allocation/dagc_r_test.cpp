#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "allocation_test_support.hpp"
#include "common/allocation/allocator.hpp"

using namespace tern::allocation;
using namespace tern::allocation::testing;

namespace {

Allocation dagcR(const std::vector<double>& shares, double mean_ratio, uint32_t dim = 100000) {
  Budget budget;
  budget.mean_ratio = mean_ratio;
  return makeAllocator("dagc-r")->allocate(loads(shares), dim, budget);
}

// Theorem 4 / Algorithm 2 of the DAGC paper (docs/dagc.md, method) written out, for shares already
// sorted largest first; no clipping.
std::vector<double> paperClosedForm(const std::vector<double>& p, double budget) {
  const std::size_t n = p.size();
  double big_p = 0.0;
  for (double x : p) big_p += std::pow(x, 2.0 / 3.0);
  double best_phi = INFINITY;
  std::size_t best_j = 0;
  std::size_t best_ref = 0;
  double best_q = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t ref = j == n - 1 ? n - 2 : n - 1;
    const double q = (big_p - std::pow(p[j], 2.0 / 3.0)) / std::pow(p[ref], 2.0 / 3.0);
    const double phi = (p[j] * (1 + q) + p[ref] * q * (1 + q)) / budget;
    if (phi < best_phi) {
      best_phi = phi;
      best_j = j;
      best_ref = ref;
      best_q = q;
    }
  }
  std::vector<double> delta(n);
  const double floor = budget / (best_q + 1);
  for (std::size_t i = 0; i < n; ++i) {
    delta[i] = floor * std::pow(p[i] / p[best_ref], 2.0 / 3.0);
  }
  delta[best_j] = floor;
  return delta;
}

}  // namespace

TEST_CASE("dagc-r on shares 0.5, 0.3, 0.2 equals the closed form worked out by hand") {
  // B = 3 * 0.01 = 0.03; t_i = p_i^(2/3) = 0.629961, 0.448140, 0.341995; P = 1.420096.
  // j = 1 (ref 3): Q = (P - t1) / t3 = 2.310371, phi*B = 0.5*3.310371 + 0.2*2.310371*3.310371
  //              = 3.184822
  // j = 2 (ref 3): Q = (P - t2) / t3 = 2.842016, phi*B = 0.3*3.842016 + 0.2*2.842016*3.842016
  //              = 3.336419
  // j = 3 (ref 2): Q = (P - t3) / t2 = 2.405721, phi*B = 0.2*3.405721 + 0.3*2.405721*3.405721
  //              = 3.139109  <- smallest
  // delta_3 = 0.03 / 3.405721 = 0.0088087; delta_2 = delta_3 * (t2 / t2) = 0.0088087;
  // delta_1 = delta_3 * t1 / t2 = 0.0088087 * 1.405721 = 0.0123826.
  const Allocation a = dagcR({0.5, 0.3, 0.2}, 0.01);
  REQUIRE(a.ratios.size() == 3);
  CHECK(a.ratios[0] == doctest::Approx(0.0123826).epsilon(1e-5));
  CHECK(a.ratios[1] == doctest::Approx(0.0088087).epsilon(1e-5));
  CHECK(a.ratios[2] == doctest::Approx(0.0088087).epsilon(1e-5));
  // The paper's objective value phi_{j*} is exactly Phi of its allocation.
  CHECK(a.phi == doctest::Approx(3.139109 / 0.03).epsilon(1e-5));
}

TEST_CASE("dagc-r can put the largest worker at the floor, as its argmin dictates") {
  // p = 0.7, 0.1, 0.1, 0.1: t1 = 0.7^(2/3), t = 0.1^(2/3); (P - t1) / t4 = 3 exactly, so
  // phi_1 * B = 0.7 * 4 + 0.1 * 3 * 4 = 4.0, while j = 2, 3, 4 give Q = (t1 + 2t)/t = 5.659
  // and phi * B = 0.1 * 6.659 + 0.1 * 5.659 * 6.659 = 4.435. So j* = 1 and
  // delta_1 = B / 4 and delta_i = delta_1 * t / t = B / 4: the uniform allocation.
  const Allocation a = dagcR({0.7, 0.1, 0.1, 0.1}, 0.02);
  for (double r : a.ratios) CHECK(r == doctest::Approx(0.02).epsilon(1e-12));
}

TEST_CASE("dagc-r with two workers is always uniform because both candidates tie") {
  // n = 2: Q_1 = t2 / t2 = 1 and Q_2 = t1 / t1 = 1, phi_1 = phi_2 = 2 (p1 + p2) / B.
  const Allocation a = dagcR({0.95, 0.05}, 0.1);
  CHECK(a.ratios[0] == doctest::Approx(0.1));
  CHECK(a.ratios[1] == doctest::Approx(0.1));
}

TEST_CASE("dagc-r maps the sorted closed form back to the caller's worker order") {
  const Allocation sorted = dagcR({0.5, 0.3, 0.2}, 0.01);
  const Allocation shuffled = dagcR({0.2, 0.5, 0.3}, 0.01);
  CHECK(shuffled.ratios[0] == doctest::Approx(sorted.ratios[2]));
  CHECK(shuffled.ratios[1] == doctest::Approx(sorted.ratios[0]));
  CHECK(shuffled.ratios[2] == doctest::Approx(sorted.ratios[1]));
  CHECK(shuffled.caps[1] == sorted.caps[0]);
}

TEST_CASE("dagc-r equals an independent transcription of the paper on random sorted shares") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 3 + trial % 12;
    std::vector<double> p = dirichlet(rng, std::vector<double>(n, 0.7));
    std::sort(p.rbegin(), p.rend());
    const double mean_ratio = 0.001 * (1 + trial % 5);
    const std::vector<double> expected = paperClosedForm(p, n * mean_ratio);
    if (*std::max_element(expected.begin(), expected.end()) > 1.0) continue;  // clipped case
    const Allocation a = dagcR(p, mean_ratio);
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(a.ratios[i] == doctest::Approx(expected[i]).epsilon(1e-9));
    }
  }
}

TEST_CASE("dagc-r clips a ratio above one and gives the excess to the others pro rata") {
  // Same shares as the hand-computed case with B = 2.7: the closed form scales linearly,
  // delta = 2.7 / 0.03 * (0.0123826, 0.0088087, 0.0088087) = (1.11443, 0.79278, 0.79278).
  // Clipping worker 1 to 1 leaves 1.7 for the two equal others: 0.85 each.
  const Allocation a = dagcR({0.5, 0.3, 0.2}, 0.9);
  CHECK(a.ratios[0] == doctest::Approx(1.0));
  CHECK(a.ratios[1] == doctest::Approx(0.85));
  CHECK(a.ratios[2] == doctest::Approx(0.85));
}

TEST_CASE("dagc-r clipping keeps the closed form's proportions among unclipped workers") {
  const std::vector<double> p = {0.6, 0.2, 0.15, 0.05};
  const double budget = 4 * 0.8;
  const std::vector<double> raw = paperClosedForm(p, budget);
  REQUIRE(raw[0] > 1.0);
  const double scale = (budget - 1.0) / (raw[1] + raw[2] + raw[3]);
  const Allocation a = dagcR(p, 0.8);
  CHECK(a.ratios[0] == doctest::Approx(1.0));
  for (std::size_t i = 1; i < 4; ++i) CHECK(a.ratios[i] == doctest::Approx(raw[i] * scale));
  CHECK(sum(a.ratios) == doctest::Approx(budget));
}

TEST_CASE("dagc-r is not monotone in the share: the runner-up to the floor gets the floor") {
  // The floor worker j* and the reference worker share delta_{j*}, so a worker with more data
  // than another can receive the same ratio (docs/dagc.md, "Deviations from the paper").
  const Allocation a = dagcR({0.4, 0.3, 0.2, 0.1}, 0.01);
  CHECK(a.ratios[2] == doctest::Approx(a.ratios[3]));
  CHECK(a.ratios[1] > a.ratios[2]);
}

TEST_CASE("dagc-r puts workers without data at the floor and keeps the budget") {
  const Allocation a = dagcR({0.5, 0.3, 0.2, 0.0, 0.0}, 0.01);
  const double floor = *std::min_element(a.ratios.begin(), a.ratios.end());
  CHECK(a.ratios[3] == doctest::Approx(floor));
  CHECK(a.ratios[4] == doctest::Approx(floor));
  CHECK(sum(a.ratios) == doctest::Approx(0.05));
  // Among the workers with data the proportions are the closed form's.
  const std::vector<double> raw = paperClosedForm({0.5, 0.3, 0.2}, 1.0);
  CHECK(a.ratios[0] / a.ratios[1] == doctest::Approx(raw[0] / raw[1]));
}
