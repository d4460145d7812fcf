#include "common/costmodel/calibration_times.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace tern::costmodel {

void CalibrationTimes::record(size_t bytes, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0.0) return;
  auto [it, fresh] = fastest_.emplace(bytes, seconds);
  if (!fresh) it->second = std::min(it->second, seconds);
}

std::optional<double> CalibrationTimes::extrapolate(size_t bytes) const {
  auto above = fastest_.lower_bound(bytes);  // the first size not below `bytes`
  if (std::distance(fastest_.begin(), above) < 2) return std::nullopt;
  const auto hi = std::prev(above);
  const auto lo = std::prev(hi);
  const double run = static_cast<double>(hi->first - lo->first);
  const double slope = std::max(0.0, (hi->second - lo->second) / run);
  return hi->second + slope * static_cast<double>(bytes - hi->first);
}

bool CalibrationTimes::tooLong(size_t bytes, double max_seconds) const {
  if (!(max_seconds > 0.0)) return false;
  const std::optional<double> t = extrapolate(bytes);
  return t && *t > max_seconds;
}

}  // namespace tern::costmodel
