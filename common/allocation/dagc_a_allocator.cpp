#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"

namespace tern::allocation {

Allocation DagcAAllocator::allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                                    const Budget& budget) const {
  if (!(budget.mean_threshold > 0.0) || !std::isfinite(budget.mean_threshold)) {
    throw std::invalid_argument("dagc-a: budget.mean_threshold (lambda_bar) must be positive");
  }
  // A threshold does not fix how much is sent; the uniform caps are reported for reference.
  Allocation out = UniformAllocator().allocate(workers, dim, budget);
  if (workers.empty()) return out;
  const std::vector<double> shares = normalisedShares(workers);
  double big_p = 0.0;
  // p^(2/3) as cbrt(p)^2: cbrt(p * p) underflows to 0 for a share below about 1e-162.
  for (double p : shares) big_p += std::cbrt(p) * std::cbrt(p);
  const double scale = budget.mean_threshold * big_p / static_cast<double>(workers.size());
  out.thresholds.resize(workers.size());
  for (std::size_t i = 0; i < workers.size(); ++i) {
    // Eq. 17; a worker without data gets an infinite threshold (it has nothing to send), which
    // keeps the harmonic mean of the thresholds at lambda_bar.
    out.thresholds[i] = shares[i] > 0.0 ? scale / (std::cbrt(shares[i]) * std::cbrt(shares[i]))
                                        : std::numeric_limits<double>::infinity();
  }
  return out;
}

}  // namespace tern::allocation
