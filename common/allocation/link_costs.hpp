#pragma once
// Per-coordinate link costs for cost-aware allocation (papers/dagc.md, cost-aware
// generalisation): b_i = seconds_per_packet * bytes_per_coordinate / packet_bytes from each
// worker's fitted link model, a_i its fixed cost. Workers without a fitted link get the median of
// the fitted ones, so a newcomer is neither favoured nor starved until it has been measured;
// likewise a fixed cost a_i <= 0 (a fit clamped at zero) takes the median of the positive ones.
#include <cstdint>
#include <vector>

#include "common/allocation/allocator.hpp"

namespace tern::allocation {

struct LinkCosts {
  bool known = false;                  // at least one worker has a fitted link
  std::vector<double> per_coordinate;  // b_i, seconds per kept coordinate
  std::vector<double> fixed;           // a_i, seconds per upload
};

// Throws std::invalid_argument if packet_bytes is 0. When no link is known, every b_i is 1 and
// `known` is false: the costs are then equal and carry no unit.
LinkCosts linkCosts(const std::vector<WorkerLoad>& workers, const Budget& budget);

// Largest k_i with a_i + b_i * k_i <= deadline_seconds, within [1, d]. When even one coordinate
// misses the deadline the cap is 1: a worker always sends something.
uint32_t deadlineCap(const LinkCosts& links, std::size_t worker, uint32_t dim,
                     const Budget& budget);

}  // namespace tern::allocation
