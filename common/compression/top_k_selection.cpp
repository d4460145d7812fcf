#include "common/compression/top_k_selection.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
// AVX2 halves the instructions of the filtering pass, which is compute-bound with SSE2
// (measured: ~1.5x the time of a plain streaming read, ~1x with AVX2). The binary stays
// baseline x86-64: only functions marked target("avx2") use it, chosen at run time.
#define TERN_TOPK_AVX2 1
#endif

namespace tern::compression {

namespace detail {

uint64_t groupHitMaskPortable(const float* p, uint32_t threshold) {
  // A vector OR over the group first: most groups hold no candidate, and GCC/Clang vector
  // extensions lower this to NEON on AArch64. Keys are below 2^31, so signed compares are exact.
  typedef int32_t v4i __attribute__((vector_size(16)));
  const int32_t tm1 = int32_t(threshold) - 1;
  const v4i t = {tm1, tm1, tm1, tm1};
  const v4i abs_mask = {0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF};
  v4i any = {0, 0, 0, 0};
  for (unsigned q = 0; q < 16; ++q) {
    v4i x;
    std::memcpy(&x, p + 4 * q, 16);
    any |= (x & abs_mask) > t;
  }
  if ((any[0] | any[1] | any[2] | any[3]) == 0) return 0;
  uint64_t mask = 0;
  for (unsigned j = 0; j < 64; ++j) mask |= uint64_t(magnitudeKey(p[j]) >= threshold) << j;
  return mask;
}

namespace {

inline uint64_t hitMask64(const float* p, uint32_t threshold) {
#if defined(__SSE2__)
  // key >= t  <=>  key > t - 1 (threshold 0 gives -1: everything). Two saturating packs turn
  // sixteen 32-bit lane masks into sixteen bytes, so one movemask yields 16 bits.
  const __m128i t = _mm_set1_epi32(int32_t(threshold) - 1);
  const __m128i abs_mask = _mm_set1_epi32(0x7FFFFFFF);
  auto lanes = [&](const float* q) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm_cmpgt_epi32(_mm_and_si128(x, abs_mask), t);
  };
  auto bits16 = [&](const float* b) {
    const __m128i lo = _mm_packs_epi32(lanes(b), lanes(b + 4));
    const __m128i hi = _mm_packs_epi32(lanes(b + 8), lanes(b + 12));
    return uint64_t(uint32_t(_mm_movemask_epi8(_mm_packs_epi16(lo, hi))));
  };
  return bits16(p) | (bits16(p + 16) << 16) | (bits16(p + 32) << 32) | (bits16(p + 48) << 48);
#else
  return groupHitMaskPortable(p, threshold);
#endif
}

}  // namespace

uint64_t groupHitMask(const float* p, uint32_t threshold) { return hitMask64(p, threshold); }

#if defined(TERN_TOPK_AVX2)
namespace {

__attribute__((target("avx2"))) inline uint64_t hitMask64Avx2(const float* p, uint32_t threshold) {
  const __m256i t = _mm256_set1_epi32(int32_t(threshold) - 1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  auto lanes = [&](const float* q) __attribute__((target("avx2"))) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    return _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), t);
  };
  // The packs work within 128-bit halves, leaving 4-lane runs in the order
  // 0, 2, 4, 6, 1, 3, 5, 7; one cross-lane permute restores coordinate order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  auto bits32 = [&](const float* b) __attribute__((target("avx2"))) {
    const __m256i lo = _mm256_packs_epi32(lanes(b), lanes(b + 8));
    const __m256i hi = _mm256_packs_epi32(lanes(b + 16), lanes(b + 24));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(lo, hi), order);
    return uint64_t(uint32_t(_mm256_movemask_epi8(bytes)));
  };
  return bits32(p) | (bits32(p + 32) << 32);
}

}  // namespace

__attribute__((target("avx2"))) uint64_t groupHitMaskAvx2(const float* p, uint32_t threshold) {
  return hitMask64Avx2(p, threshold);
}

bool haveAvx2() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
           __builtin_cpu_supports("popcnt");
  }();
  return have;
}
#else
bool haveAvx2() { return false; }
#endif

uint32_t kthLargestKey(std::span<uint32_t> keys, size_t rank) {
  uint32_t* k = keys.data();
  size_t n = keys.size();
  for (;;) {
    // Below ~30k keys introselect's few passes beat building histograms (measured).
    if (n <= 32768) {
      std::nth_element(k, k + rank, k + n, std::greater<uint32_t>());
      return k[rank];
    }
    // Bins span [lo, hi] of the keys still in play, so they spread over the histogram
    // whatever the scale; each round keeps one bin, 1/2048 of the range.
    uint32_t lo = k[0], hi = k[0];
    for (size_t i = 1; i < n; ++i) {
      lo = std::min(lo, k[i]);
      hi = std::max(hi, k[i]);
    }
    const unsigned width = unsigned(std::bit_width(hi - lo));
    if (width == 0) return lo;
    const unsigned shift = width > 11 ? width - 11 : 0;
    uint32_t counts[2048] = {};
    for (size_t i = 0; i < n; ++i) ++counts[(k[i] - lo) >> shift];
    uint32_t bin = (hi - lo) >> shift;
    while (counts[bin] <= rank) {  // the bins above hold fewer than rank + 1 keys
      rank -= counts[bin];
      --bin;
    }
    if (shift == 0) return lo + bin;
    size_t m = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t key = k[i];
      k[m] = key;
      m += ((key - lo) >> shift) == bin;
    }
    n = m;
  }
}

}  // namespace detail

namespace {

// Sampling reads runs of kChunk neighbours (one cache line each) spread evenly over g. Below
// kSampleMinDim the sample would be a large part of the array, so every coordinate is a
// candidate.
constexpr size_t kChunk = 16;
constexpr size_t kMaxSampleChunks = 512;
constexpr size_t kSampleMinDim = 32768;
constexpr size_t kGroup = 64;
constexpr size_t kSpanGroups = 1024;
// The branch-free scan is used from one hit per kDenseHitsPerGroup groups on.
constexpr size_t kDenseHitsPerGroup = 3;
// Histogram bins of the exact selection among candidates.
constexpr unsigned kBinBits = 11;
constexpr size_t kBins = size_t(1) << kBinBits;
constexpr size_t kSpill = 8;
// Output slots past the kept ones that packing the kept candidates may write.
constexpr size_t kPackSlack = 8;

}  // namespace

TopKSelector::TopKSelector(bool allow_avx2) : use_avx2_(allow_avx2 && detail::haveAvx2()) {}

void TopKSelector::reserve(size_t n) {
  if (n <= capacity_) return;
  n = std::max(n, 2 * capacity_);
  auto idx = std::make_unique_for_overwrite<uint32_t[]>(n);
  auto bits = std::make_unique_for_overwrite<uint32_t[]>(n);
  if (count_ > 0) {
    std::memcpy(idx.get(), cand_index_.get(), count_ * 4);
    std::memcpy(bits.get(), cand_bits_.get(), count_ * 4);
  }
  cand_index_ = std::move(idx);
  cand_bits_ = std::move(bits);
  capacity_ = n;
}

namespace {

// Leaves the r + 1 largest of keys[0, n) in keys[0, r] as a min-heap. Only a key that enters
// the heap costs a sift-down (about (r + 1) ln(n / (r + 1)) of them); the smaller child is
// picked without a branch, so each sift-down mispredicts about once, where a partial sort also
// sorts the heap afterwards.
void keepLargest(uint32_t* keys, size_t n, size_t r) {
  const size_t size = r + 1;
  std::make_heap(keys, keys + size, std::greater<uint32_t>());
  for (size_t i = size; i < n; ++i) {
    const uint32_t x = keys[i];
    if (x <= keys[0]) continue;
    size_t hole = 0;
    for (size_t child = 1; child < size; child = 2 * hole + 1) {
      child += (child + 1 < size) && keys[child + 1] < keys[child];
      if (keys[child] >= x) break;
      keys[hole] = keys[child];
      hole = child;
    }
    keys[hole] = x;
  }
}

}  // namespace

TopKSelector::Bracket TopKSelector::estimateBracket(std::span<const float> g, uint32_t k,
                                                    unsigned attempt) {
  const size_t d = g.size();
  const size_t chunks = std::min(kMaxSampleChunks, d / 256);
  const size_t m = chunks * kChunk;
  // About mu = k m / d sampled keys lie at or above the k-th largest key; the sample's key of
  // rank mu + z sqrt(mu) + c then has at least k keys above it in g unless the sample count
  // falls z standard deviations short. The first attempt takes z = 2.5 (a shortfall, about
  // 1 call in 160 for independent coordinates, costs one more pass); the second z = 6.
  // Symmetrically, rank mu - 2.5 sqrt(mu) - 2 bounds the k-th largest from above.
  const double mu = double(k) * double(m) / double(d);
  const double spread = attempt == 0 ? 2.5 * std::sqrt(mu) + 2.0 : 6.0 * std::sqrt(mu) + 16.0;
  const double rank_low = mu + spread;
  const double rank_high = mu - 2.5 * std::sqrt(mu) - 2.0;
  Bracket b;
  if (rank_low >= double(m)) return b;
  const size_t r = size_t(rank_low);
  scratch_.resize(m);
  const size_t stride = (d - kChunk) / (chunks - 1);
  for (size_t c = 0; c < chunks; ++c) {
    const float* p = g.data() + c * stride;
    for (size_t j = 0; j < kChunk; ++j) scratch_[c * kChunk + j] = magnitudeKey(p[j]);
  }
  if (r < m / 32) {
    // A heap of the r + 1 largest is cheaper than a full selection while r is a small part
    // of the sample (measured: 2-3x at r = m / 64); its root is the key of rank r.
    keepLargest(scratch_.data(), m, r);
    if (rank_high >= 0.0) {
      const size_t h = size_t(rank_high);
      std::nth_element(scratch_.begin(), scratch_.begin() + ptrdiff_t(h),
                       scratch_.begin() + ptrdiff_t(r + 1), std::greater<uint32_t>());
      b.high = scratch_[h];
    }
    b.low = *std::min_element(scratch_.begin(), scratch_.begin() + ptrdiff_t(r + 1));
    return b;
  } else {
    std::nth_element(scratch_.begin(), scratch_.begin() + ptrdiff_t(r), scratch_.end(),
                     std::greater<uint32_t>());
    if (rank_high >= 0.0) {
      const size_t h = size_t(rank_high);
      std::nth_element(scratch_.begin(), scratch_.begin() + ptrdiff_t(h),
                       scratch_.begin() + ptrdiff_t(r), std::greater<uint32_t>());
      b.high = scratch_[h];
    }
  }
  b.low = scratch_[r];
  return b;
}

namespace {

// At the ~1% candidate density of top-k about half of the 64-coordinate groups hold a hit, so
// a per-group test mispredicts about every other group. There, two passes over a span avoid
// data-dependent branches: the first stores every group's hit mask and advances the output
// only past nonzero ones; the second writes each kept group's first kSlots hits
// unconditionally (writes past the last hit are overwritten later) and loops only for the
// group with more (about one in ten at 1%; two slots measured 3-6% faster than three). At lower
// densities the test is mostly false and predicts well, and one pass that tests each group is
// cheaper (measured at 0.25%: 10-15% less time).
constexpr unsigned kSlots = 2;

template <uint64_t (*kMask)(const float*, uint32_t)>
[[gnu::always_inline]] inline size_t maskGroups(const float* p, size_t groups, uint32_t threshold,
                                                uint64_t* masks, uint32_t* group_of) {
  size_t m = 0;
  for (size_t q = 0; q < groups; ++q) {
    const uint64_t w = kMask(p + q * kGroup, threshold);
    masks[m] = w;
    group_of[m] = uint32_t(q);
    m += w != 0;
  }
  return m;
}

[[gnu::always_inline]] inline size_t expandGroups(const float* p, size_t begin,
                                                  const uint64_t* masks, const uint32_t* group_of,
                                                  size_t m, uint32_t* out_index, uint32_t* out_bits,
                                                  size_t n) {
  constexpr uint64_t kTop = uint64_t(1) << 63;  // keeps the bit scan defined once w is 0
  for (size_t e = 0; e < m; ++e) {
    uint64_t w = masks[e];
    const size_t base = begin + size_t(group_of[e]) * kGroup;
    const unsigned hits = unsigned(std::popcount(w));
    for (unsigned r = 0; r < kSlots; ++r) {
      const size_t i = base + unsigned(std::countr_zero(w | kTop));
      out_index[n + r] = uint32_t(i);
      out_bits[n + r] = std::bit_cast<uint32_t>(p[i]);
      w &= w - 1;
    }
    n += std::min(hits, kSlots);
    while (w != 0) {
      const size_t i = base + unsigned(std::countr_zero(w));
      out_index[n] = uint32_t(i);
      out_bits[n] = std::bit_cast<uint32_t>(p[i]);
      ++n;
      w &= w - 1;
    }
  }
  return n;
}

template <uint64_t (*kMask)(const float*, uint32_t)>
[[gnu::always_inline]] inline size_t testGroups(const float* p, size_t begin, size_t groups,
                                                uint32_t threshold, uint32_t* out_index,
                                                uint32_t* out_bits, size_t n) {
  for (size_t q = 0; q < groups; ++q) {
    const size_t base = begin + q * kGroup;
    for (uint64_t w = kMask(p + base, threshold); w != 0; w &= w - 1) {
      const size_t i = base + unsigned(std::countr_zero(w));
      out_index[n] = uint32_t(i);
      out_bits[n] = std::bit_cast<uint32_t>(p[i]);
      ++n;
    }
  }
  return n;
}

// Both forms of the span scan, compiled once per mask function so that the mask inlines.
#define TERN_COLLECT_SPAN_BODY(MASK_FN)                                                        \
  if (!dense) return testGroups<MASK_FN>(p, begin, groups, threshold, out_index, out_bits, n); \
  const size_t m = maskGroups<MASK_FN>(p + begin, groups, threshold, masks, group_of);         \
  return expandGroups(p, begin, masks, group_of, m, out_index, out_bits, n);

size_t collectSpan(bool dense, const float* p, size_t begin, size_t groups, uint32_t threshold,
                   uint64_t* masks, uint32_t* group_of, uint32_t* out_index, uint32_t* out_bits,
                   size_t n) {
  TERN_COLLECT_SPAN_BODY(detail::hitMask64)
}

#if defined(TERN_TOPK_AVX2)
// Also compiled for popcnt and tzcnt, which every AVX2 processor has (haveAvx2 checks).
__attribute__((target("avx2,bmi,popcnt"))) size_t collectSpanAvx2(
    bool dense, const float* p, size_t begin, size_t groups, uint32_t threshold, uint64_t* masks,
    uint32_t* group_of, uint32_t* out_index, uint32_t* out_bits, size_t n) {
  TERN_COLLECT_SPAN_BODY(detail::hitMask64Avx2)
}
#endif
#undef TERN_COLLECT_SPAN_BODY

}  // namespace

void TopKSelector::collect(std::span<const float> g, uint32_t threshold, bool dense) {
  count_ = 0;
  const float* p = g.data();
  const size_t d = g.size();
  uint64_t masks[kSpanGroups];
  uint32_t group_of[kSpanGroups];
  size_t i = 0;
  while (i + kGroup <= d) {
    // Spans of groups: room for the worst case is made once per span, the masks of a span stay
    // in L1 between the two passes, and the scan's form follows the previous span's density.
    const size_t groups = std::min(kSpanGroups, (d - i) / kGroup);
    reserve(count_ + groups * kGroup + kSlots);
    const size_t before = count_;
#if defined(TERN_TOPK_AVX2)
    if (use_avx2_)
      count_ = collectSpanAvx2(dense, p, i, groups, threshold, masks, group_of, cand_index_.get(),
                               cand_bits_.get(), count_);
    else
#endif
      count_ = collectSpan(dense, p, i, groups, threshold, masks, group_of, cand_index_.get(),
                           cand_bits_.get(), count_);
    dense = (count_ - before) * kDenseHitsPerGroup >= groups;
    i += groups * kGroup;
  }
  reserve(count_ + kGroup);
  for (; i < d; ++i) {
    cand_index_[count_] = uint32_t(i);
    cand_bits_[count_] = std::bit_cast<uint32_t>(p[i]);
    count_ += magnitudeKey(p[i]) >= threshold;
  }
}

void TopKSelector::pickExact(uint32_t k, uint32_t low, uint32_t high,
                             std::vector<uint32_t>& indices, std::vector<float>& values) {
  // All of the top k are candidates, and every candidate's key is at least `low`. One pass
  // histograms the keys, bins spanning [low, high] and kSpill bins past them holding everything
  // above (spread so that consecutive increments do not wait on each other). When fewer than k
  // keys lie above `high`, the bin holding the k-th largest key is the only one left to select
  // in (a handful of keys when the bracket is tight); otherwise every candidate is.
  const uint32_t* bits = cand_bits_.get();
  high = std::max(high, low);
  const unsigned width = unsigned(std::bit_width(high - low));
  const unsigned shift = width > kBinBits - 1 ? width - (kBinBits - 1) : 0;
  uint32_t counts[kBins + kSpill] = {};
  for (size_t i = 0; i < count_; ++i) {
    const uint32_t key = bits[i] & 0x7FFFFFFFu;
    ++counts[std::min<uint32_t>((key - low) >> shift, kBins + (i & (kSpill - 1)))];
  }
  size_t spilled = 0;
  for (size_t b = kBins; b < kBins + kSpill; ++b) spilled += counts[b];
  const bool in_one_bin = spilled < k;
  size_t rank = k - 1;
  uint32_t bin = 0;
  if (in_one_bin) {
    rank -= spilled;
    bin = kBins - 1;
    while (counts[bin] <= rank) {  // the bins above hold fewer than rank + 1 keys
      rank -= counts[bin];
      --bin;
    }
  }
  // The selection set (the keys in [set_low, set_high]) with candidate positions, in candidate
  // order, and a copy of its keys for kthLargestKey to reorder; each area has room for the
  // slots packing may write past its end.
  const uint32_t set_low = in_one_bin ? low + (bin << shift) : 0;
  const uint32_t set_high = in_one_bin
                                ? uint32_t(std::min<uint64_t>(
                                      uint64_t(set_low) + (uint64_t(1) << shift) - 1, 0x7FFFFFFFu))
                                : 0x7FFFFFFFu;
  const size_t area = count_ + kPackSlack;
  scratch_.resize(3 * area);
  uint32_t* set_keys = scratch_.data();
  uint32_t* set_pos = set_keys + area;
  const size_t m = keysInRange(set_low, set_high, set_keys, set_pos);
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
  if (use_avx2_) return keysInRangeAvx2(cand_bits_.get(), count_, low, high, out_keys, out_pos);
#endif
  return keysInRangeScalar(cand_bits_.get(), 0, count_, low, high, out_keys, out_pos, 0);
}

size_t TopKSelector::keepAtLeast(size_t from, size_t to, uint32_t key, uint32_t* out_index,
                                 float* out_values, size_t n) const {
#if defined(TERN_TOPK_AVX2)
  if (use_avx2_)
    return keepAtLeastAvx2(cand_index_.get(), cand_bits_.get(), from, to, key, out_index,
                           out_values, n);
#endif
  return keepAtLeastScalar(cand_index_.get(), cand_bits_.get(), from, to, key, out_index,
                           out_values, n);
}

void TopKSelector::select(std::span<const float> g, uint32_t k, std::vector<uint32_t>& indices,
                          std::vector<float>& values) {
  const size_t d = g.size();
  k = uint32_t(std::min<size_t>(k, d));
  if (k == 0) {
    indices.clear();
    values.clear();
    return;
  }
  if (k == d) {
    indices.resize(d);
    std::iota(indices.begin(), indices.end(), 0u);
    values.assign(g.begin(), g.end());
    return;
  }
  if (d >= kSampleMinDim) {
    for (unsigned attempt = 0; attempt < 2; ++attempt) {
      const Bracket b = estimateBracket(g, k, attempt);
      if (b.low == 0) break;
      collect(g, b.low, size_t(k) * kDenseHitsPerGroup * kGroup >= d);
      if (count_ >= k) return pickExact(k, b.low, b.high, indices, values);
    }
  }
  collect(g, 0, true);
  pickExact(k, 0, 0x7FFFFFFFu, indices, values);
}

void TopKSelector::selectAtLeast(std::span<const float> g, uint32_t key,
                                 std::vector<uint32_t>& indices, std::vector<float>& values) {
  collect(g, key, true);
  indices.assign(cand_index_.get(), cand_index_.get() + count_);
  values.resize(count_);
  if (count_ > 0) std::memcpy(values.data(), cand_bits_.get(), count_ * 4);
}

}  // namespace tern::compression
