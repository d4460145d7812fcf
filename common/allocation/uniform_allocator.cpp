#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"

namespace tern::allocation {

Allocation UniformAllocator::allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                                      const Budget& budget) const {
  Allocation out;
  if (workers.empty()) return out;
  const std::vector<double> shares = normalisedShares(workers);
  const double total = totalRatioBudget(workers.size(), dim, budget);
  out.ratios.assign(workers.size(), total / static_cast<double>(workers.size()));
  out.caps = roundCapsToVolume(out.ratios, dim, total);
  if (budget.mean_threshold > 0.0) out.thresholds.assign(workers.size(), budget.mean_threshold);
  out.phi = keyFactor(shares, out.ratios);
  return out;
}

}  // namespace tern::allocation
