#pragma once
// Shared plumbing of the allocators: validating the workers' shares, turning a Budget into a
// total keep-ratio sum_i delta_i, and rounding ratios into integer caps k_i in [1, d] that still
// respect the budget (largest-remainder rounding, papers/dagc.md "Budget").
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

// Integer caps from ratios. Each k_i lies in [1, upper_i] (upper_i <= d) and the caps together
// satisfy sum_i cost_i * k_i <= limit, unless the lower bound k_i >= 1 alone forces more. A
// worker whose cost_i alone exceeds the limit gets k_i = 1 and is left out of the sum (no
// budget can hold it; the others are planned as without it). A ratio that is not a number
// counts as 0.
// cost_i is what one kept coordinate of worker i spends from the budget (1 for a volume budget).
std::vector<uint32_t> roundCaps(const std::vector<double>& ratios, uint32_t dim,
                                const std::vector<double>& cost_per_coordinate, double limit,
                                const std::vector<uint32_t>& upper);

// Volume-budget rounding: unit costs, limit floor(total_ratio * d), upper d.
std::vector<uint32_t> roundCapsToVolume(const std::vector<double>& ratios, uint32_t dim,
                                        double total_ratio);

// Scales the ratios so that sum_i min(s * delta_i, 1) equals total_ratio: ratios above 1 are
// clipped and their excess goes to the others in proportion to their ratios, which keeps every
// ratio between unclipped workers as the method chose it. Requires total_ratio <= n.
std::vector<double> clipAndRedistribute(const std::vector<double>& ratios, double total_ratio);

}  // namespace tern::allocation
