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
  problem.weights.assign(n, 1.0);
  problem.upper.assign(n, 1.0);
  problem.budget = totalRatioBudget(n, dim, budget);
  out.ratios = minimiseKeyFactor(problem);
  out.caps = roundCapsToVolume(out.ratios, dim, problem.budget);
  out.phi = keyFactor(problem.shares, out.ratios);
  return out;
}

}  // namespace tern::allocation
