#pragma once
// The sorted magnitudes of a vector and their prefix sums, the one structure every CAT
// improvement function reads (papers/cat.md, "Compressors and their improvement functions"):
// |g|_[1] >= |g|_[2] >= ..., S1(T) = sum_{j<=T} |g|_[j], S2(T) = sum_{j<=T} g_[j]^2.
// Only the largest `sorted_count` magnitudes are sorted (O(d + m log m)): T never exceeds the
// coordinator's cap, so nothing below it needs an order.
#include <cstddef>
#include <span>
#include <vector>

namespace tern::tuning {

class MagnitudeProfile {
 public:
  // Sorts the min(sorted_count, v.size()) largest magnitudes of v. NaN entries count as zero.
  MagnitudeProfile(std::span<const float> v, size_t sorted_count);

  size_t dim() const { return dim_; }
  size_t sortedCount() const { return mags_.size(); }
  size_t nonZeros() const { return non_zeros_; }

  // |g|_[rank], rank in [1, sortedCount()].
  double magnitude(size_t rank) const { return mags_[rank - 1]; }
  // S1(T), S2(T) for T in [0, sortedCount()] or T >= dim() (the totals).
  double s1(size_t T) const;
  double s2(size_t T) const;
  // sum_{j > k} |g|_[j] for k in [0, sortedCount()], summed from the small end so that it stays
  // accurate when it is tiny next to S1(d) (stochastic sparsification divides by it).
  double tailL1(size_t k) const { return tail1_[k]; }
  double totalL1() const { return tail1_[0]; }
  double totalL2sq() const { return total2_; }

 private:
  size_t dim_ = 0;
  size_t non_zeros_ = 0;
  std::vector<double> mags_;   // descending
  std::vector<double> pre1_;   // pre1_[T] = S1(T), size sortedCount()+1
  std::vector<double> pre2_;   // pre2_[T] = S2(T)
  std::vector<double> tail1_;  // tail1_[k] = sum_{j>k} |g|_[j], size sortedCount()+1
  double total2_ = 0;
};

}  // namespace tern::tuning
