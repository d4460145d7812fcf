#pragma once
// Integer refinement of a cost-aware plan priced in whole packets (docs/dagc.md, method): with
// few packets per worker the rounded relaxation can be far from the best integer plan, so
// single-packet moves are tried until none lowers the key factor Phi.
#include <cstdint>
#include <vector>

#include "common/allocation/link_costs.hpp"

namespace tern::allocation {

// Improves `counts` (each worker's units, within [1, upper_i] and sum_i cost_i * counts_i <=
// limit) by the best single moves: one more unit for a worker while the budget has room, one
// unit from j to i, the uneven trades (one dear unit for several cheap ones and back), and with
// a dozen workers or fewer one unit to i paid with one of j's and as few of a third worker's as
// the rest takes. Keeps the rounded plan as it is past 256 workers.
void refineUnits(const std::vector<double>& shares, uint32_t dim,
                 const std::vector<Packing>& packing, const std::vector<double>& cost, double limit,
                 const std::vector<uint32_t>& upper, std::vector<uint32_t>& counts);

}  // namespace tern::allocation
