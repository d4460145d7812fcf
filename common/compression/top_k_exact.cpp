// The exact part of top-k selection (top_k_selection.hpp): among the candidates the streaming
// pass kept, a histogram brackets the k-th largest key, a radix selection finds it, and the
// candidates at or above it are packed out in index order.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "common/compression/top_k_avx2.hpp"
#include "common/compression/top_k_selection.hpp"

namespace tern::compression {

namespace {

// Histogram bins of the exact selection among candidates.
constexpr unsigned kBinBits = 11;
constexpr size_t kBins = size_t(1) << kBinBits;
constexpr size_t kSpill = 8;
// Output slots past the kept ones that packing the kept candidates may write.
constexpr size_t kPackSlack = 8;

}  // namespace

namespace {

// Where the k-th largest of `count` candidate keys (each at least `low`) lies: one pass
// histograms the keys, bins spanning [low, high] and kSpill bins past them holding everything
// above (spread so that consecutive increments do not wait on each other). When fewer than k keys
// lie above `high`, the bin holding the k-th largest key is the only one left to select in (a
// handful of keys when the bracket is tight), [set_low, set_high], where the k-th is the
// rank-th largest (0-based); otherwise every candidate is, and rank is k - 1.
struct KthBracket {
  uint32_t set_low = 0;
  uint32_t set_high = 0x7FFFFFFFu;
  size_t rank = 0;
};

KthBracket bracketKth(const uint32_t* bits, size_t count, uint32_t k, uint32_t low, uint32_t high) {
  high = std::max(high, low);
  const unsigned width = unsigned(std::bit_width(high - low));
  const unsigned shift = width > kBinBits - 1 ? width - (kBinBits - 1) : 0;
  uint32_t counts[kBins + kSpill] = {};
  for (size_t i = 0; i < count; ++i) {
    const uint32_t key = bits[i] & 0x7FFFFFFFu;
    ++counts[std::min<uint32_t>((key - low) >> shift, kBins + (i & (kSpill - 1)))];
  }
  size_t spilled = 0;
  for (size_t b = kBins; b < kBins + kSpill; ++b) spilled += counts[b];
  KthBracket out;
  out.rank = k - 1;
  if (spilled >= k) return out;
  out.rank -= spilled;
  uint32_t bin = kBins - 1;
  while (counts[bin] <= out.rank) {  // the bins above hold fewer than rank + 1 keys
    out.rank -= counts[bin];
    --bin;
  }
  out.set_low = low + (bin << shift);
  out.set_high =
      uint32_t(std::min<uint64_t>(uint64_t(out.set_low) + (uint64_t(1) << shift) - 1, 0x7FFFFFFFu));
  return out;
}

}  // namespace

void TopKSelector::pickExact(uint32_t k, uint32_t low, uint32_t high,
                             std::vector<uint32_t>& indices, std::vector<float>& values) {
  // All of the top k are candidates, and every candidate's key is at least `low`.
  const KthBracket bracket = bracketKth(s_->bits.get(), count_, k, low, high);
  const size_t rank = bracket.rank;
  // The selection set (the keys in the bracket) with candidate positions, in candidate order,
  // and a copy of its keys for kthLargestKey to reorder; each area has room for the slots
  // packing may write past its end.
  const size_t area = count_ + kPackSlack;
  s_->keys.resize(3 * area);
  uint32_t* set_keys = s_->keys.data();
  uint32_t* set_pos = set_keys + area;
  const size_t m = keysInRange(bracket.set_low, bracket.set_high, set_keys, set_pos);
  uint32_t* work = set_pos + area;
  std::copy(set_keys, set_keys + m, work);
  const uint32_t kth = detail::kthLargestKey(std::span(work, m), rank);
  // Every candidate outside the set that is above it is above kth: (k - 1 - rank) of them.
  size_t above = k - 1 - rank;
  for (size_t j = 0; j < m; ++j) above += set_keys[j] > kth;
  // Ties at the k-th key go to the lowest indices (candidates are in index order), and all of
  // them are in the set: up to `cut`, one past the last tie taken, every key >= kth is kept,
  // after it every key > kth.
  size_t cut = 0;
  for (size_t j = 0, ties = k - above; ties > 0; ++j) {
    const bool tie = set_keys[j] == kth;
    ties -= tie;
    cut = tie ? set_pos[j] + 1 : cut;
  }
  indices.resize(size_t(k) + kPackSlack);
  values.resize(size_t(k) + kPackSlack);
  const size_t n = keepAtLeast(0, cut, kth, indices.data(), values.data(), 0);
  keepAtLeast(cut, count_, kth + 1, indices.data(), values.data(), n);
  indices.resize(k);
  values.resize(k);
}

namespace {

// Appends (cand[i], bits[i]) for i in [from, to) whose key is at least `key`; returns the new
// count. Without branches: about k of the candidates are kept, in no predictable pattern. One
// slot past the kept ones may be written.
size_t keepAtLeastScalar(const uint32_t* cand, const uint32_t* bits, size_t from, size_t to,
                         uint32_t key, uint32_t* out_index, float* out_values, size_t n) {
  for (size_t i = from; i < to; ++i) {
    out_index[n] = cand[i];
    out_values[n] = std::bit_cast<float>(bits[i]);
    n += (bits[i] & 0x7FFFFFFFu) >= key;
  }
  return n;
}

// Appends the key and position of each candidate in [from, to) whose key lies in [low, high];
// returns the new count. Without branches; one slot past the kept ones is written.
size_t keysInRangeScalar(const uint32_t* bits, size_t from, size_t to, uint32_t low, uint32_t high,
                         uint32_t* out_keys, uint32_t* out_pos, size_t m) {
  for (size_t i = from; i < to; ++i) {
    const uint32_t key = bits[i] & 0x7FFFFFFFu;
    out_keys[m] = key;
    out_pos[m] = uint32_t(i);
    m += (key >= low) & (key <= high);
  }
  return m;
}

#if defined(TERN_TOPK_AVX2)
// For each 8-lane mask, the lanes whose bit is set packed to the front, one lane number a byte.
constexpr std::array<uint64_t, 256> kPackOrder = [] {
  std::array<uint64_t, 256> order{};
  for (unsigned mask = 0; mask < 256; ++mask) {
    unsigned kept = 0;
    for (unsigned lane = 0; lane < 8; ++lane)
      if ((mask >> lane) & 1) order[mask] |= uint64_t(lane) << (8 * kept++);
  }
  return order;
}();

// Stores the lanes of a and b whose `keep` lane is all ones, packed to the front of out_a and
// out_b (all eight slots are written); returns how many were kept.
__attribute__((target("avx2,popcnt"))) inline unsigned packLanes(__m256i keep, __m256i a, __m256i b,
                                                                 uint32_t* out_a, uint32_t* out_b) {
  const unsigned mask = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(keep)));
  const __m256i order =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&kPackOrder[mask])));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_a), _mm256_permutevar8x32_epi32(a, order));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_b), _mm256_permutevar8x32_epi32(b, order));
  return unsigned(std::popcount(mask));
}

// Eight candidates a step: their keep mask selects a lane order that packs the kept ones to the
// front of one store per output; up to kPackSlack slots past the kept ones may be written.
__attribute__((target("avx2,popcnt"))) size_t keepAtLeastAvx2(const uint32_t* cand,
                                                              const uint32_t* bits, size_t from,
                                                              size_t to, uint32_t key,
                                                              uint32_t* out_index,
                                                              float* out_values, size_t n) {
  // key >= t  <=>  key > t - 1 in signed 32-bit (keys are below 2^31; t = 2^31 keeps none).
  const __m256i t = _mm256_set1_epi32(int32_t(key - 1));
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  size_t i = from;
  for (; i + 8 <= to; i += 8) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cand + i));
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs_mask), t);
    n += packLanes(keep, c, b, out_index + n, reinterpret_cast<uint32_t*>(out_values + n));
  }
  return keepAtLeastScalar(cand, bits, i, to, key, out_index, out_values, n);
}

__attribute__((target("avx2,popcnt"))) size_t keysInRangeAvx2(const uint32_t* bits, size_t count,
                                                              uint32_t low, uint32_t high,
                                                              uint32_t* out_keys,
                                                              uint32_t* out_pos) {
  const __m256i below = _mm256_set1_epi32(int32_t(low) - 1);  // keys and bounds are < 2^31
  const __m256i top = _mm256_set1_epi32(int32_t(high));
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i step = _mm256_set1_epi32(8);
  __m256i pos = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  size_t m = 0, i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i key =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i)), abs_mask);
    const __m256i in =
        _mm256_andnot_si256(_mm256_cmpgt_epi32(key, top), _mm256_cmpgt_epi32(key, below));
    m += packLanes(in, key, pos, out_keys + m, out_pos + m);
    pos = _mm256_add_epi32(pos, step);
  }
  return keysInRangeScalar(bits, i, count, low, high, out_keys, out_pos, m);
}
#endif

}  // namespace

size_t TopKSelector::keysInRange(uint32_t low, uint32_t high, uint32_t* out_keys,
                                 uint32_t* out_pos) const {
#if defined(TERN_TOPK_AVX2)
  if (use_avx2_) return keysInRangeAvx2(s_->bits.get(), count_, low, high, out_keys, out_pos);
#endif
  return keysInRangeScalar(s_->bits.get(), 0, count_, low, high, out_keys, out_pos, 0);
}

size_t TopKSelector::keepAtLeast(size_t from, size_t to, uint32_t key, uint32_t* out_index,
                                 float* out_values, size_t n) const {
#if defined(TERN_TOPK_AVX2)
  if (use_avx2_)
    return keepAtLeastAvx2(s_->index.get(), s_->bits.get(), from, to, key, out_index, out_values,
                           n);
#endif
  return keepAtLeastScalar(s_->index.get(), s_->bits.get(), from, to, key, out_index, out_values,
                           n);
}

}  // namespace tern::compression
