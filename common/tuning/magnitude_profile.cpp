#include "common/tuning/magnitude_profile.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>

namespace tern::tuning {

MagnitudeProfile::MagnitudeProfile(std::span<const float> v, size_t sorted_count) : dim_(v.size()) {
  std::vector<float> mags(v.size());
  for (size_t j = 0; j < v.size(); ++j) {
    const float a = std::fabs(v[j]);
    mags[j] = std::isnan(a) ? 0.0f : a;
    non_zeros_ += mags[j] != 0.0f;
  }
  const size_t m = std::min(sorted_count, mags.size());
  if (m < mags.size()) {
    std::nth_element(mags.begin(), mags.begin() + static_cast<std::ptrdiff_t>(m), mags.end(),
                     std::greater<>());
  }
  std::sort(mags.begin(), mags.begin() + static_cast<std::ptrdiff_t>(m), std::greater<>());

  mags_.assign(mags.begin(), mags.begin() + static_cast<std::ptrdiff_t>(m));
  pre1_.assign(m + 1, 0.0);
  pre2_.assign(m + 1, 0.0);
  for (size_t j = 0; j < m; ++j) {
    pre1_[j + 1] = pre1_[j] + mags_[j];
    pre2_[j + 1] = pre2_[j] + mags_[j] * mags_[j];
  }
  // The unsorted rest, then the sorted part from its small end upwards.
  double rest1 = 0.0, rest2 = 0.0;
  for (size_t j = m; j < mags.size(); ++j) {
    const double a = mags[j];
    rest1 += a;
    rest2 += a * a;
  }
  tail1_.assign(m + 1, 0.0);
  tail1_[m] = rest1;
  for (size_t k = m; k-- > 0;) tail1_[k] = tail1_[k + 1] + mags_[k];
  total2_ = pre2_[m] + rest2;
}

// Prefix sums first, totals only past the sorted part: one summation order per argument keeps
// S1 and S2 monotone in T as computed, which the tuner's pruning bounds rely on.
double MagnitudeProfile::s1(size_t T) const {
  if (T <= sortedCount()) return pre1_[T];
  assert(T >= dim_);
  return totalL1();
}

double MagnitudeProfile::s2(size_t T) const {
  if (T <= sortedCount()) return pre2_[T];
  assert(T >= dim_);
  return total2_;
}

}  // namespace tern::tuning
