#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"
#include "common/allocation/key_factor_minimiser.hpp"

namespace tern::allocation {

Allocation DagcOptAllocator::allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                                      const Budget& budget) const {
  Allocation out;
  if (workers.empty()) return out;
  const std::size_t n = workers.size();
  KeyFactorProblem problem;
  problem.shares = normalisedShares(workers);
  // Workers priced apart weigh in the budget by their price per coordinate.
  const VolumeBudget volume = volumeBudget(workers, dim, budget);
  problem.weights = volume.weights;
  problem.upper.assign(n, 1.0);
  problem.budget = volume.total;
  out.ratios = minimiseKeyFactor(problem);
  out.caps = roundCapsToBudget(out.ratios, dim, volume);
  out.phi = keyFactor(problem.shares, out.ratios);
  return out;
}

}  // namespace tern::allocation
