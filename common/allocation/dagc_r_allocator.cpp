#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"

namespace tern::allocation {

namespace {

// Theorem 4 / Algorithm 2 for shares sorted p_1 >= ... >= p_n (n >= 2), all positive, with a
// unit budget: the closed form is linear in B and its choice of j* does not depend on B, so the
// caller scales. Returns ratios in the sorted order.
std::vector<double> closedFormUnitBudget(const std::vector<double>& sorted) {
  const std::size_t n = sorted.size();
  std::vector<double> t(n);
  // p^(2/3) as cbrt(p)^2: p * p would underflow to 0 for shares below about 1e-154.
  for (std::size_t i = 0; i < n; ++i) t[i] = std::cbrt(sorted[i]) * std::cbrt(sorted[i]);
  const double big_p = std::accumulate(t.begin(), t.end(), 0.0);

  std::size_t best_j = 0;
  std::size_t best_ref = n - 1;
  double best_q = 0.0;
  double best_phi = std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < n; ++j) {
    // The reference worker is the smallest one, or the second smallest when j is the smallest.
    const std::size_t ref = (j != n - 1) ? n - 1 : n - 2;
    const double q = (big_p - t[j]) / t[ref];
    const double phi = sorted[j] * (1.0 + q) + sorted[ref] * q * (1.0 + q);
    if (phi < best_phi) {
      best_phi = phi;
      best_j = j;
      best_ref = ref;
      best_q = q;
    }
  }
  std::vector<double> ratios(n);
  const double floor = 1.0 / (best_q + 1.0);
  for (std::size_t i = 0; i < n; ++i) ratios[i] = floor * t[i] / t[best_ref];
  ratios[best_j] = floor;
  return ratios;
}

}  // namespace

Allocation DagcRAllocator::allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                                    const Budget& budget) const {
  Allocation out;
  if (workers.empty()) return out;
  const std::size_t n = workers.size();
  const std::vector<double> shares = normalisedShares(workers);
  const VolumeBudget volume = volumeBudget(workers, dim, budget);
  const double total = volume.total;

  // The paper assumes every p_i > 0. Workers without data sit at the floor of the others, which
  // is where the closed form puts its own floor worker j*.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < n; ++i) {
    if (shares[i] > 0.0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return shares[a] > shares[b]; });
  std::vector<double> unit(n, 0.0);
  double floor = 1.0;
  if (order.size() == 1) {
    unit[order[0]] = 1.0;
  } else {
    std::vector<double> sorted(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) sorted[k] = shares[order[k]];
    const std::vector<double> sorted_ratios = closedFormUnitBudget(sorted);
    for (std::size_t k = 0; k < order.size(); ++k) unit[order[k]] = sorted_ratios[k];
    floor = *std::min_element(sorted_ratios.begin(), sorted_ratios.end());
  }
  const std::size_t empty = n - order.size();
  const double scale = total / (1.0 + static_cast<double>(empty) * floor);
  std::vector<double> raw(n);
  for (std::size_t i = 0; i < n; ++i) raw[i] = (shares[i] > 0.0 ? unit[i] : floor) * scale;

  // Workers priced apart keep the closed form's ratios between them, scaled to what the budget
  // buys at their prices.
  out.ratios = clipAndRedistribute(raw, volume.weights, total);
  out.caps = roundCapsToBudget(out.ratios, dim, volume);
  out.phi = keyFactor(shares, out.ratios);
  return out;
}

}  // namespace tern::allocation
