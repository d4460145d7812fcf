#include "common/tuning/magnitude_profile.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace tern::tuning {

MagnitudeProfile::MagnitudeProfile(std::span<const float> v, size_t sorted_count)
    : mags_(v.size()) {
  for (size_t j = 0; j < v.size(); ++j) {
    const float a = std::fabs(v[j]);
    mags_[j] = std::isfinite(a) ? a : 0.0f;  // NaN and infinities count as zero (as the bins do)
    non_zeros_ += mags_[j] != 0.0f;
    total1_ += mags_[j];
    total2_ += static_cast<double>(mags_[j]) * mags_[j];
  }
  sortAtLeast(sorted_count);
}

void MagnitudeProfile::sortAtLeast(size_t count) {
  count = std::min(count, mags_.size());
  if (count <= sorted_) return;
  const auto first = mags_.begin() + static_cast<std::ptrdiff_t>(sorted_);
  const auto last = mags_.begin() + static_cast<std::ptrdiff_t>(count);
  if (last != mags_.end()) std::nth_element(first, last, mags_.end(), std::greater<>());
  std::sort(first, last, std::greater<>());
  pre1_.resize(count + 1);
  pre2_.resize(count + 1);
  for (size_t j = sorted_; j < count; ++j) {
    const double a = mags_[j];
    pre1_[j + 1] = pre1_[j] + a;
    pre2_[j + 1] = pre2_[j] + a * a;
  }
  sorted_ = count;
}

double MagnitudeProfile::tailL1(size_t k) const {
  // Through the index-order total, so the value does not depend on how far the prefix is
  // sorted; clamped because rounding may leave a tiny negative rest.
  return std::max(0.0, total1_ - pre1_[k]);
}

}  // namespace tern::tuning
