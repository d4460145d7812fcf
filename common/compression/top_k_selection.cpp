#include "common/compression/top_k_selection.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/compression/top_k_avx2.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
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

}  // namespace

TopKSelector::TopKSelector(bool allow_avx2) : use_avx2_(allow_avx2 && detail::haveAvx2()) {}

TopKSelector::Scratch& TopKSelector::threadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

void TopKSelector::reserve(size_t n) {
  if (n <= s_->capacity) return;
  n = std::max(n, 2 * s_->capacity);
  auto idx = std::make_unique_for_overwrite<uint32_t[]>(n);
  auto bits = std::make_unique_for_overwrite<uint32_t[]>(n);
  if (count_ > 0) {
    std::memcpy(idx.get(), s_->index.get(), count_ * 4);
    std::memcpy(bits.get(), s_->bits.get(), count_ * 4);
  }
  s_->index = std::move(idx);
  s_->bits = std::move(bits);
  s_->capacity = n;
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
  s_->keys.resize(m);
  const size_t stride = (d - kChunk) / (chunks - 1);
  for (size_t c = 0; c < chunks; ++c) {
    const float* p = g.data() + c * stride;
    for (size_t j = 0; j < kChunk; ++j) s_->keys[c * kChunk + j] = magnitudeKey(p[j]);
  }
  if (r < m / 32) {
    // A heap of the r + 1 largest is cheaper than a full selection while r is a small part
    // of the sample (measured: 2-3x at r = m / 64); its root is the key of rank r.
    keepLargest(s_->keys.data(), m, r);
    if (rank_high >= 0.0) {
      const size_t h = size_t(rank_high);
      std::nth_element(s_->keys.begin(), s_->keys.begin() + ptrdiff_t(h),
                       s_->keys.begin() + ptrdiff_t(r + 1), std::greater<uint32_t>());
      b.high = s_->keys[h];
    }
    b.low = *std::min_element(s_->keys.begin(), s_->keys.begin() + ptrdiff_t(r + 1));
    return b;
  } else {
    std::nth_element(s_->keys.begin(), s_->keys.begin() + ptrdiff_t(r), s_->keys.end(),
                     std::greater<uint32_t>());
    if (rank_high >= 0.0) {
      const size_t h = size_t(rank_high);
      std::nth_element(s_->keys.begin(), s_->keys.begin() + ptrdiff_t(h),
                       s_->keys.begin() + ptrdiff_t(r), std::greater<uint32_t>());
      b.high = s_->keys[h];
    }
  }
  b.low = s_->keys[r];
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
      count_ = collectSpanAvx2(dense, p, i, groups, threshold, masks, group_of, s_->index.get(),
                               s_->bits.get(), count_);
    else
#endif
      count_ = collectSpan(dense, p, i, groups, threshold, masks, group_of, s_->index.get(),
                           s_->bits.get(), count_);
    dense = (count_ - before) * kDenseHitsPerGroup >= groups;
    i += groups * kGroup;
  }
  reserve(count_ + kGroup);
  for (; i < d; ++i) {
    s_->index[count_] = uint32_t(i);
    s_->bits[count_] = std::bit_cast<uint32_t>(p[i]);
    count_ += magnitudeKey(p[i]) >= threshold;
  }
}

void TopKSelector::select(std::span<const float> g, uint32_t k, std::vector<uint32_t>& indices,
                          std::vector<float>& values) {
  s_ = &threadScratch();
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
  s_ = &threadScratch();
  collect(g, key, true);
  indices.assign(s_->index.get(), s_->index.get() + count_);
  values.resize(count_);
  if (count_ > 0) std::memcpy(values.data(), s_->bits.get(), count_ * 4);
}

}  // namespace tern::compression
