#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"
#include "common/allocation/key_factor_minimiser.hpp"
#include "common/allocation/link_costs.hpp"

namespace tern::allocation {

namespace {

// The Phi minimiser under the configured budget with every upload within `deadline` seconds
// (0 = no deadline).
Allocation solve(const std::vector<WorkerLoad>& workers, uint32_t dim, const Budget& budget,
                 const LinkCosts& links, double deadline) {
  const std::size_t n = workers.size();
  KeyFactorProblem problem;
  problem.shares = normalisedShares(workers);
  std::vector<uint32_t> upper(n, dim);
  if (links.known && deadline > 0.0) {
    Budget bounded = budget;
    bounded.deadline_seconds = deadline;
    for (std::size_t i = 0; i < n; ++i) upper[i] = deadlineCap(links, i, dim, bounded);
  }
  problem.upper.resize(n);
  for (std::size_t i = 0; i < n; ++i) problem.upper[i] = static_cast<double>(upper[i]) / dim;

  std::vector<double> cost_per_coordinate;
  double limit = 0.0;
  if (links.known && budget.seconds_per_round > 0.0) {
    // sum_i b_i * delta_i * d <= seconds: the Lagrangian puts delta_i ~ (p_i / b_i)^(2/3).
    problem.weights.resize(n);
    for (std::size_t i = 0; i < n; ++i) problem.weights[i] = links.per_coordinate[i] * dim;
    problem.budget = budget.seconds_per_round;
    cost_per_coordinate = links.per_coordinate;
    limit = budget.seconds_per_round;
  } else {
    // A volume budget prices every coordinate alike; the links then matter only through the
    // deadline caps, and without a deadline this is dagc-opt.
    problem.weights.assign(n, 1.0);
    problem.budget = totalRatioBudget(n, dim, budget);
    cost_per_coordinate.assign(n, 1.0);
    const double coordinates = problem.budget * dim;
    limit = std::floor(coordinates + 1e-9 * std::max(1.0, coordinates));
  }
  Allocation out;
  out.ratios = minimiseKeyFactor(problem);
  out.caps = roundCaps(out.ratios, dim, cost_per_coordinate, limit, upper);
  out.phi = keyFactor(problem.shares, out.ratios);
  return out;
}

// The slowest upload of the plan on the fitted links: what the round waits for.
double slowestUpload(const LinkCosts& links, const std::vector<uint32_t>& caps) {
  double slowest = 0.0;
  for (std::size_t i = 0; i < caps.size(); ++i) {
    slowest = std::max(slowest, links.fixed[i] + links.per_coordinate[i] * caps[i]);
  }
  return slowest;
}

// Phi times the modelled round time: the quantity the deadline search minimises. Phi bounds the
// rounds needed (papers/dagc.md, key factor); the round lasts overhead + the slowest upload.
double roundCost(const Allocation& a, const LinkCosts& links, double overhead) {
  return a.phi * (overhead + slowestUpload(links, a.caps));
}

// Chooses the deadline: a log-spaced scan from "everyone sends one coordinate" up to the
// slowest upload of the unconstrained plan (above it the deadline binds no one), then a
// golden-section refinement between the neighbours of the best grid point. The cost is not
// unimodal in general (caps move in integer steps, workers hit the deadline one by one), hence
// the scan first; the unconstrained plan itself is always a candidate.
Allocation chooseDeadline(const std::vector<WorkerLoad>& workers, uint32_t dim,
                          const Budget& budget, const LinkCosts& links) {
  const double overhead = budget.round_overhead_seconds;
  Allocation best = solve(workers, dim, budget, links, 0.0);
  double best_cost = roundCost(best, links, overhead);
  const double hi = slowestUpload(links, best.caps);
  double lo = 0.0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    lo = std::max(lo, links.fixed[i] + links.per_coordinate[i]);
  }
  if (!(hi > lo) || !(lo > 0.0)) return best;

  constexpr int kGrid = 96;
  const double step = std::log(hi / lo) / kGrid;
  int best_index = kGrid;  // the unconstrained plan sits at the top of the grid
  for (int j = 0; j < kGrid; ++j) {
    const double deadline = lo * std::exp(step * j);
    Allocation a = solve(workers, dim, budget, links, deadline);
    const double cost = roundCost(a, links, overhead);
    if (cost < best_cost) {
      best_cost = cost;
      best = std::move(a);
      best_index = j;
    }
  }
  constexpr double kInvGolden = 0.6180339887498949;
  double a = step * std::max(0, best_index - 1);
  double b = step * std::min(kGrid, best_index + 1);
  auto at = [&](double x) { return solve(workers, dim, budget, links, lo * std::exp(x)); };
  double x1 = b - kInvGolden * (b - a);
  double x2 = a + kInvGolden * (b - a);
  Allocation a1 = at(x1);
  Allocation a2 = at(x2);
  double f1 = roundCost(a1, links, overhead);
  double f2 = roundCost(a2, links, overhead);
  for (int iter = 0; iter < 40; ++iter) {
    if (f1 <= f2) {
      if (f1 < best_cost) {
        best_cost = f1;
        best = a1;
      }
      b = x2;
      x2 = x1;
      a2 = std::move(a1);
      f2 = f1;
      x1 = b - kInvGolden * (b - a);
      a1 = at(x1);
      f1 = roundCost(a1, links, overhead);
    } else {
      if (f2 < best_cost) {
        best_cost = f2;
        best = a2;
      }
      a = x1;
      x1 = x2;
      a1 = std::move(a2);
      f1 = f2;
      x2 = a + kInvGolden * (b - a);
      a2 = at(x2);
      f2 = roundCost(a2, links, overhead);
    }
  }
  if (f1 < best_cost) {
    best_cost = f1;
    best = std::move(a1);
  }
  if (f2 < best_cost) best = std::move(a2);
  return best;
}

}  // namespace

Allocation CostAwareAllocator::allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                                        const Budget& budget) const {
  if (workers.empty()) return {};
  if (dim == 0) throw std::invalid_argument("allocation: model dimension must be positive");
  const LinkCosts links = linkCosts(workers, budget);
  if (budget.deadline_seconds > 0.0 || !links.known || !(budget.round_overhead_seconds > 0.0)) {
    return solve(workers, dim, budget, links, budget.deadline_seconds);
  }
  return chooseDeadline(workers, dim, budget, links);
}

}  // namespace tern::allocation
