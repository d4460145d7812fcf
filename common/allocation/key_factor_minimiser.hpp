#pragma once
// The exact minimiser of the key factor Phi (docs/dagc.md, "Deviations from the paper"):
// minimise (sum_i p_i / sqrt(delta_i)) / sqrt(min_i delta_i) subject to a linear budget
// sum_i w_i delta_i = B and 0 < delta_i <= u_i. For a floor m the optimum is the water-filling
// delta_i = clip(c * (p_i / w_i)^(2/3), m, u_i); dagc-opt has w_i = 1, cost-aware w_i = b_i * d.
#include <vector>

namespace tern::allocation {

struct KeyFactorProblem {
  std::vector<double> shares;   // p_i >= 0, summing to 1
  std::vector<double> weights;  // w_i > 0: budget spent per unit of delta_i
  std::vector<double> upper;    // u_i in (0, 1]
  double budget = 0.0;          // B > 0
};

// Ratios minimising Phi. When the budget covers every worker at its cap, returns the caps.
std::vector<double> minimiseKeyFactor(const KeyFactorProblem& problem);

// The water-filling for a fixed floor m <= min_i u_i: delta_i = clip(c * q_i, m, u_i) with c
// chosen so that sum_i w_i delta_i = B (or as close as the caps allow).
std::vector<double> waterFill(const KeyFactorProblem& problem, double floor);

}  // namespace tern::allocation
