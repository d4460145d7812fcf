#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/allocation/allocator.hpp"

namespace tern::allocation {

double keyFactor(const std::vector<double>& shares, const std::vector<double>& ratios) {
  if (shares.size() != ratios.size()) {
    throw std::invalid_argument("keyFactor: shares and ratios differ in length");
  }
  if (ratios.empty()) return 0.0;
  const double floor = *std::min_element(ratios.begin(), ratios.end());
  // A worker that sends nothing makes the bound vacuous (docs/dagc.md, method: the key factor).
  if (!(floor > 0.0)) return std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (std::size_t i = 0; i < shares.size(); ++i) sum += shares[i] / std::sqrt(ratios[i]);
  return sum / std::sqrt(floor);
}

}  // namespace tern::allocation
