#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"
#include "common/allocation/key_factor_minimiser.hpp"
#include "common/allocation/link_costs.hpp"

namespace tern::allocation {

Allocation CostAwareAllocator::allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                                        const Budget& budget) const {
  Allocation out;
  if (workers.empty()) return out;
  if (dim == 0) throw std::invalid_argument("allocation: model dimension must be positive");
  const std::size_t n = workers.size();
  const LinkCosts links = linkCosts(workers, budget);

  KeyFactorProblem problem;
  problem.shares = normalisedShares(workers);
  std::vector<uint32_t> upper(n, dim);
  if (links.known && budget.deadline_seconds > 0.0) {
    for (std::size_t i = 0; i < n; ++i) upper[i] = deadlineCap(links, i, dim, budget);
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
  out.ratios = minimiseKeyFactor(problem);
  out.caps = roundCaps(out.ratios, dim, cost_per_coordinate, limit, upper);
  out.phi = keyFactor(problem.shares, out.ratios);
  return out;
}

}  // namespace tern::allocation
