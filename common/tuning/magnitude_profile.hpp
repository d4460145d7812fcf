#pragma once
// The sorted magnitudes of a vector and their prefix sums, the one structure every CAT
// improvement function reads (docs/cat.md, method: the compressors and their improvements):
// |g|_[1] >= |g|_[2] >= ..., S1(T) = sum_{j<=T} |g|_[j], S2(T) = sum_{j<=T} g_[j]^2.
// The order is built lazily: only a prefix is sorted (partial selection, O(d + k log k)) and it
// grows when the search needs larger T, so a small T* never pays for sorting all of d.
#include <cstddef>
#include <span>
#include <vector>

namespace tern::tuning {

class MagnitudeProfile {
 public:
  // Sorts the min(sorted_count, v.size()) largest magnitudes of v. NaN and infinite entries count
  // as zero.
  MagnitudeProfile(std::span<const float> v, size_t sorted_count);

  // Extends the sorted prefix to at least min(count, dim()) magnitudes. The prefix sums of
  // the levels already sorted do not change (same values, same order of addition).
  void sortAtLeast(size_t count);

  size_t dim() const { return mags_.size(); }
  size_t sortedCount() const { return sorted_; }
  size_t nonZeros() const { return non_zeros_; }

  // |g|_[rank], rank in [1, sortedCount()]; every unsorted magnitude is <=
  // magnitude(sortedCount()).
  double magnitude(size_t rank) const { return mags_[rank - 1]; }
  // S1(T), S2(T) for T in [0, sortedCount()].
  double s1(size_t T) const { return pre1_[T]; }
  double s2(size_t T) const { return pre2_[T]; }
  // Totals over every coordinate, summed in index order (independent of how much is sorted).
  double totalL1() const { return total1_; }
  double totalL2sq() const { return total2_; }
  // sum_{j > k} |g|_[j] for k in [0, sortedCount()].
  double tailL1(size_t k) const;

 private:
  std::vector<float> mags_;  // |v|, the first sorted_ in descending order, the rest below them
  size_t sorted_ = 0;
  size_t non_zeros_ = 0;
  std::vector<double> pre1_{0.0};  // pre1_[T] = S1(T), size sorted_ + 1
  std::vector<double> pre2_{0.0};  // pre2_[T] = S2(T)
  double total1_ = 0.0;
  double total2_ = 0.0;
};

}  // namespace tern::tuning
