#pragma once
// Exact top-k selection by magnitude (docs/cat.md, method: top-T): the k largest |g_j|, ties
// broken towards the lower index, returned in increasing index order. It is the inner loop of
// the top-k, S+Q and stochastic compressors, so it avoids a full selection over d: a threshold
// estimated from a small sample keeps a few more than k candidates in one streaming pass, and an
// exact radix selection among those candidates gives the same answer as sorting all of g.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tern::compression {

// The sort key of |x|: the float's bits without the sign. For non-negative floats the integer
// order is the numeric order, and NaN sorts above infinity, so a NaN is selected (and rejected
// by the caller) rather than silently skipped.
inline uint32_t magnitudeKey(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  return u & 0x7FFFFFFFu;
}

namespace detail {
// Bit j of the result is set when magnitudeKey(p[j]) >= threshold, for j < 64. The SSE2 version
// (baseline on every x86-64) and the portable one give the same bits; the portable one serves
// other targets and is exposed so tests can compare the two.
uint64_t groupHitMask(const float* p, uint32_t threshold);
uint64_t groupHitMaskPortable(const float* p, uint32_t threshold);
// True when the filtering pass may use AVX2 (x86-64 hosts that have it, checked at run time);
// groupHitMaskAvx2 exists on x86-64 builds and must only be called then.
bool haveAvx2();
#if defined(__x86_64__) && defined(__GNUC__)
uint64_t groupHitMaskAvx2(const float* p, uint32_t threshold);
#endif

// The key of rank `rank` (0 = largest) among `keys` (rank < keys.size()): for many keys,
// histogram passes over the keys' range narrow it 2048-fold each (few data-dependent branches,
// unlike a quickselect partition); nth_element finishes the remainder. Reorders `keys`.
uint32_t kthLargestKey(std::span<uint32_t> keys, size_t rank);
}  // namespace detail

class TopKSelector {
 public:
  // allow_avx2 = false keeps the scan on the baseline path even where the CPU has AVX2, so
  // that tests can check both against a reference.
  explicit TopKSelector(bool allow_avx2 = true);

  // Writes the selected indices to `indices` and g at those indices to `values` (both resized
  // to min(k, g.size())).
  void select(std::span<const float> g, uint32_t k, std::vector<uint32_t>& indices,
              std::vector<float>& values);
  // Every j with magnitudeKey(g[j]) >= key, in increasing order (the hard threshold).
  void selectAtLeast(std::span<const float> g, uint32_t key, std::vector<uint32_t>& indices,
                     std::vector<float>& values);

 private:
  // Keys bracketing the k-th largest from a sample: `low` leaves at least k keys of g at or
  // above it with high probability, `high` at most k. low == 0 means "no useful estimate".
  struct Bracket {
    uint32_t low = 0;
    uint32_t high = 0x7FFFFFFFu;
  };
  Bracket estimateBracket(std::span<const float> g, uint32_t k, unsigned attempt);
  // `dense` picks the scan's form for the first span (about k hits expected); later spans
  // follow the density seen.
  void collect(std::span<const float> g, uint32_t threshold, bool dense);
  void reserve(size_t n);
  void pickExact(uint32_t k, uint32_t low, uint32_t high, std::vector<uint32_t>& indices,
                 std::vector<float>& values);
  // Writes the key and position of every candidate whose key lies in [low, high], in candidate
  // order; returns their count. May write up to kPackSlack slots past it.
  size_t keysInRange(uint32_t low, uint32_t high, uint32_t* out_keys, uint32_t* out_pos) const;
  // Appends the candidates in [from, to) whose key is at least `key` after the first n outputs;
  // returns the new count. May write up to kPackSlack slots past it.
  size_t keepAtLeast(size_t from, size_t to, uint32_t key, uint32_t* out_index, float* out_values,
                     size_t n) const;

  // Work storage of one selection, not kept between calls: one per thread, shared by the
  // thread's selectors (a simulator's thousands of workers select one at a time).
  struct Scratch {
    // Candidates in increasing index order with their float bits, kept so that neither the
    // exact selection nor the caller has to gather from g again. Sized without zero-filling.
    std::unique_ptr<uint32_t[]> index;
    std::unique_ptr<uint32_t[]> bits;
    size_t capacity = 0;
    std::vector<uint32_t> keys;  // the sample's keys, then the exact selection's set
  };
  static Scratch& threadScratch();

  bool use_avx2_;
  Scratch* s_ = nullptr;  // this thread's, set by select and selectAtLeast
  size_t count_ = 0;
};

}  // namespace tern::compression
