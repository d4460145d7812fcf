#pragma once
// Shared plumbing of the allocators: validating the workers' shares, turning a Budget into a
// total keep-ratio sum_i delta_i (weighted by each worker's price per coordinate when workers
// are priced apart), rounding ratios into integer caps k_i in [1, d] that still respect the
// budget (largest-remainder rounding, docs/dagc.md, method), and pricing a cap handed out
// within a round that is already open.
#include <cstdint>
#include <vector>

#include "common/allocation/allocator.hpp"

namespace tern::allocation {

// p_i normalised to sum 1 (the coordinator may pass sample counts). All-zero shares are treated
// as equal shares. Throws std::invalid_argument on a negative or non-finite share.
std::vector<double> normalisedShares(const std::vector<WorkerLoad>& workers);

// sum_i delta_i allowed per round by the volume budget: bytes_per_round / (d *
// bytes_per_coordinate) when set, else n * mean_ratio; clamped to n (every worker sends
// everything). Throws std::invalid_argument if dim is 0 or neither budget is positive.
double totalRatioBudget(std::size_t n, uint32_t dim, const Budget& budget);

// What one push of a worker costs on the wire: its own measured price, else the budget's.
PushPrice pushPrice(const WorkerLoad& worker, const Budget& budget);

// True when some worker carries prices of its own that differ from the budget's.
bool pricedApart(const std::vector<WorkerLoad>& workers, const Budget& budget);

// A volume budget as a linear constraint on the keep-ratios: sum_i weights_i * delta_i <= total.
// Under bytes_per_round with workers priced apart, weights_i is worker i's bytes per coordinate
// over the budget's and total = (bytes_per_round - sum_i bytes_per_push_i) / (d * the budget's
// bytes_per_coordinate), clamped to sum_i weights_i (everyone sends everything). Otherwise every
// weight is 1 and total = totalRatioBudget(n, dim, budget).
struct VolumeBudget {
  std::vector<double> weights;
  double total = 0.0;
  bool unitWeights() const;
  double weightSum() const;
  // The same constraint on integer caps: sum_i weights_i * k_i <= limit (whole coordinates
  // when every weight is 1).
  double coordinateLimit(uint32_t dim) const;
};
VolumeBudget volumeBudget(const std::vector<WorkerLoad>& workers, uint32_t dim,
                          const Budget& budget);

// Integer caps in [1, d] within a volume budget: roundCapsToVolume for unit weights, else
// roundCaps with costs weights_i and limit coordinateLimit(d).
std::vector<uint32_t> roundCapsToBudget(const std::vector<double>& ratios, uint32_t dim,
                                        const VolumeBudget& volume);

// Integer caps from ratios. Each k_i lies in [1, upper_i] (upper_i <= d) and the caps together
// satisfy sum_i cost_i * k_i <= limit, unless the lower bound k_i >= 1 alone forces more. A
// worker whose cost_i alone exceeds the limit gets k_i = 1 and is left out of the sum (no
// budget can hold it; the others are planned as without it). A ratio that is not a number
// counts as 0.
// cost_i is what one kept coordinate of worker i spends from the budget (1 for a volume budget).
std::vector<uint32_t> roundCaps(const std::vector<double>& ratios, uint32_t dim,
                                const std::vector<double>& cost_per_coordinate, double limit,
                                const std::vector<uint32_t>& upper);
// The same with worker i's caps counted out of dims_i units (pricing units of different sizes:
// each worker's whole packets).
std::vector<uint32_t> roundCaps(const std::vector<double>& ratios,
                                const std::vector<uint32_t>& dims,
                                const std::vector<double>& cost_per_coordinate, double limit,
                                const std::vector<uint32_t>& upper);

// Volume-budget rounding: unit costs, limit floor(total_ratio * d), upper d.
std::vector<uint32_t> roundCapsToVolume(const std::vector<double>& ratios, uint32_t dim,
                                        double total_ratio);

// Scales the ratios so that sum_i min(s * delta_i, 1) equals total_ratio: ratios above 1 are
// clipped and their excess goes to the others in proportion to their ratios, which keeps every
// ratio between unclipped workers as the method chose it. Requires total_ratio <= n.
std::vector<double> clipAndRedistribute(const std::vector<double>& ratios, double total_ratio);
// The same with weights: sum_i weights_i * min(s * delta_i, 1) equals total.
std::vector<double> clipAndRedistribute(const std::vector<double>& ratios,
                                        const std::vector<double>& weights, double total);

// Caps handed out within a round that is already open (a worker joining it) are held to what the
// round's budget leaves, priced as the plans price caps: in bytes under bytes_per_round
// (bytes_per_push + bytes_per_coordinate * k at the worker's pushPrice), else in coordinates (k).
// roundLimit is what a round with n members may spend in that unit: bytes_per_round, or
// floor(n * mean_ratio * d) coordinates (at most n * d).
double roundPushCost(const PushPrice& price, const Budget& budget, uint32_t k);
double roundLimit(std::size_t n, uint32_t dim, const Budget& budget);
// The largest k in [1, wanted] with spent + roundPushCost(price, budget, k) <= limit; 0 when
// not even one coordinate fits.
uint32_t capWithinRound(const PushPrice& price, const Budget& budget, uint32_t wanted, double spent,
                        double limit);

}  // namespace tern::allocation
