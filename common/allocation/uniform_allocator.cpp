#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"

namespace tern::allocation {

Allocation UniformAllocator::allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                                      const Budget& budget) const {
  Allocation out;
  if (workers.empty()) return out;
  const std::vector<double> shares = normalisedShares(workers);
  // One ratio for everyone; workers priced apart each pay their own price for it.
  const VolumeBudget volume = volumeBudget(workers, dim, budget);
  out.ratios.assign(workers.size(), volume.total / volume.weightSum());
  out.caps = roundCapsToBudget(out.ratios, dim, volume);
  if (budget.mean_threshold > 0.0) out.thresholds.assign(workers.size(), budget.mean_threshold);
  out.phi = keyFactor(shares, out.ratios);
  return out;
}

}  // namespace tern::allocation
