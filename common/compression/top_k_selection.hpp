#pragma once
// Exact top-k selection by magnitude (papers/cat.md, Q_T in eq. 9): the k largest |g_j|, ties
// broken towards the lower index, returned in increasing index order. It is the inner loop of
// the top-k and S+Q compressors, so it avoids a full selection over d: a threshold estimated
// from a small sample keeps a few more than k candidates in one streaming pass, and an exact
// selection among those candidates gives the same answer as sorting all of g.
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

class TopKSelector {
 public:
  // Writes the selected indices to `out` (resized to min(k, g.size())).
  void select(std::span<const float> g, uint32_t k, std::vector<uint32_t>& out);
  // Writes every j with magnitudeKey(g[j]) >= key, in increasing order (the hard threshold).
  void selectAtLeast(std::span<const float> g, uint32_t key, std::vector<uint32_t>& out);

 private:
  uint32_t estimateThreshold(std::span<const float> g, uint32_t k, unsigned widen);
  void collect(std::span<const float> g, uint32_t threshold);
  void reserve(size_t n);
  void pickExact(uint32_t k, std::vector<uint32_t>& out);

  std::unique_ptr<uint32_t[]> cand_index_;
  std::unique_ptr<uint32_t[]> cand_key_;
  size_t capacity_ = 0;
  size_t count_ = 0;
  std::vector<uint32_t> scratch_;
};

}  // namespace tern::compression
