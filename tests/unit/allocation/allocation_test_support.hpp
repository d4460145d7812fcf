#pragma once
// Helpers shared by the allocation tests: building worker loads, sampling share vectors and
// feasible allocations, and an independent brute-force evaluation of Phi.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/allocation/allocator.hpp"

namespace tern::allocation::testing {

inline std::vector<WorkerLoad> loads(const std::vector<double>& shares) {
  std::vector<WorkerLoad> out;
  for (double p : shares) out.push_back(WorkerLoad{p, 0.0, 0.0, std::nullopt});
  return out;
}

inline std::vector<WorkerLoad> loads(const std::vector<double>& shares,
                                     const std::vector<double>& seconds_per_packet,
                                     const std::vector<double>& seconds_fixed = {}) {
  std::vector<WorkerLoad> out;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    out.push_back(WorkerLoad{shares[i], seconds_per_packet[i],
                             seconds_fixed.empty() ? 0.0 : seconds_fixed[i], std::nullopt});
  }
  return out;
}

// n workers with geometric volumes, largest / smallest = skew, normalised, largest first.
inline std::vector<double> geometricShares(std::size_t n, double skew) {
  std::vector<double> p(n);
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = std::pow(skew, -static_cast<double>(i) / static_cast<double>(n - 1));
    total += p[i];
  }
  for (double& x : p) x /= total;
  return p;
}

inline std::vector<double> dirichlet(std::mt19937_64& rng, const std::vector<double>& alpha) {
  std::vector<double> x(alpha.size());
  double total = 0.0;
  for (std::size_t i = 0; i < alpha.size(); ++i) {
    std::gamma_distribution<double> gamma(alpha[i], 1.0);
    x[i] = gamma(rng);
    total += x[i];
  }
  for (double& v : x) v /= total;
  return x;
}

inline double sum(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s;
}

inline uint64_t sum(const std::vector<uint32_t>& v) {
  uint64_t s = 0;
  for (uint32_t x : v) s += x;
  return s;
}

// Phi written out again from docs/dagc.md (method), independent of keyFactor.
inline double phiReference(const std::vector<double>& p, const std::vector<double>& delta) {
  double floor = delta[0];
  for (double d : delta) floor = std::min(floor, d);
  double s = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) s += p[i] / std::sqrt(delta[i]);
  return s / std::sqrt(floor);
}

// Brute force over the floor: a fine grid of m, and for each the water level c found by plain
// bisection, delta_i = clip(c * (p_i / w_i)^(2/3), m, 1) with sum_i w_i delta_i = budget.
inline double bruteForceMinPhi(const std::vector<double>& p, const std::vector<double>& w,
                               double budget, int grid = 3000) {
  double weight_sum = sum(w);
  const double top = std::min(1.0, budget / weight_sum);
  double best = INFINITY;
  for (int g = 1; g <= grid; ++g) {
    const double m = top * g / grid;
    auto fill = [&](double c) {
      std::vector<double> d(p.size());
      for (std::size_t i = 0; i < p.size(); ++i) {
        d[i] = std::clamp(c * std::pow(p[i] / w[i], 2.0 / 3.0), m, 1.0);
      }
      return d;
    };
    auto spend = [&](const std::vector<double>& d) {
      double s = 0.0;
      for (std::size_t i = 0; i < d.size(); ++i) s += w[i] * d[i];
      return s;
    };
    double lo = 0.0;
    double hi = 1.0;
    while (spend(fill(hi)) < budget && hi < 1e30) hi *= 2.0;
    for (int it = 0; it < 200; ++it) {
      const double mid = 0.5 * (lo + hi);
      (spend(fill(mid)) < budget ? lo : hi) = mid;
    }
    best = std::min(best, phiReference(p, fill(hi)));
  }
  return best;
}

}  // namespace tern::allocation::testing
