#include "common/compression/top_k_selection.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace tern::compression {

namespace {

// Sampling reads kSampleChunks runs of kChunk neighbours (one cache line each) spread evenly
// over g: 4096 keys for a few hundred cache misses. Below kSampleMinDim the sample would be a
// large part of the array, so every coordinate is a candidate.
constexpr size_t kChunk = 16;
constexpr size_t kSampleChunks = 256;
constexpr size_t kSampleSize = kChunk * kSampleChunks;
constexpr size_t kSampleMinDim = 16 * kSampleSize;
constexpr size_t kBlock = 16;

}  // namespace

void TopKSelector::reserve(size_t n) {
  if (n <= capacity_) return;
  auto idx = std::make_unique_for_overwrite<uint32_t[]>(n);
  auto key = std::make_unique_for_overwrite<uint32_t[]>(n);
  if (count_ > 0) {
    std::memcpy(idx.get(), cand_index_.get(), count_ * 4);
    std::memcpy(key.get(), cand_key_.get(), count_ * 4);
  }
  cand_index_ = std::move(idx);
  cand_key_ = std::move(key);
  capacity_ = n;
}

uint32_t TopKSelector::estimateThreshold(std::span<const float> g, uint32_t k, unsigned widen) {
  const size_t d = g.size();
  scratch_.resize(kSampleSize);
  const size_t stride = (d - kChunk) / (kSampleChunks - 1);
  for (size_t c = 0; c < kSampleChunks; ++c) {
    const float* p = g.data() + c * stride;
    for (size_t j = 0; j < kChunk; ++j) scratch_[c * kChunk + j] = magnitudeKey(p[j]);
  }
  // Sample keys at or above the threshold number `rank + 1`; the expected hit count is
  // mu = k * m / d, and `rank` sits several standard deviations (sqrt(mu)) above it so that
  // fewer than k candidates is rare. Each retry widens the margin fourfold.
  const double mu = double(k) * double(kSampleSize) / double(d);
  double rank = mu + 4.0 * std::sqrt(mu) + 4.0;
  for (unsigned i = 0; i < widen; ++i) rank = rank * 4.0 + 64.0;
  if (rank >= double(kSampleSize)) return 0;
  const size_t r = size_t(rank);
  std::nth_element(scratch_.begin(), scratch_.begin() + ptrdiff_t(r), scratch_.end(),
                   std::greater<uint32_t>());
  return scratch_[r];
}

void TopKSelector::collect(std::span<const float> g, uint32_t threshold) {
  count_ = 0;
  const float* p = g.data();
  const size_t d = g.size();
  const int32_t t = int32_t(threshold);  // keys are < 2^31: signed compares are exact
  size_t i = 0;
  for (; i + kBlock <= d; i += kBlock) {
    // Most blocks hold no candidate: test the whole block with a branch-free, vectorisable
    // reduction and only then write candidates.
    int32_t any = 0;
    for (size_t j = 0; j < kBlock; ++j) any |= int32_t(magnitudeKey(p[i + j])) >= t;
    if (!any) continue;
    if (count_ + kBlock > capacity_) reserve(2 * capacity_ + 1024);
    uint32_t* ci = cand_index_.get();
    uint32_t* ck = cand_key_.get();
    size_t n = count_;
    for (size_t j = 0; j < kBlock; ++j) {
      const uint32_t key = magnitudeKey(p[i + j]);
      ci[n] = uint32_t(i + j);
      ck[n] = key;
      n += int32_t(key) >= t;
    }
    count_ = n;
  }
  if (count_ + kBlock > capacity_) reserve(2 * capacity_ + 1024);
  for (; i < d; ++i) {
    const uint32_t key = magnitudeKey(p[i]);
    cand_index_[count_] = uint32_t(i);
    cand_key_[count_] = key;
    count_ += int32_t(key) >= t;
  }
}

void TopKSelector::pickExact(uint32_t k, std::vector<uint32_t>& out) {
  // The k-th largest key among the candidates; all of the top k are candidates.
  scratch_.assign(cand_key_.get(), cand_key_.get() + count_);
  std::nth_element(scratch_.begin(), scratch_.begin() + (k - 1), scratch_.end(),
                   std::greater<uint32_t>());
  const uint32_t kth = scratch_[k - 1];
  const uint32_t* ck = cand_key_.get();
  const uint32_t* ci = cand_index_.get();
  size_t above = 0;
  for (size_t i = 0; i < count_; ++i) above += ck[i] > kth;
  // Ties at the k-th key go to the lowest indices: candidates are in index order.
  size_t ties_left = k - above;
  out.resize(k);
  size_t o = 0;
  for (size_t i = 0; i < count_; ++i) {
    const uint32_t key = ck[i];
    if (key > kth) {
      out[o++] = ci[i];
    } else if (key == kth && ties_left > 0) {
      out[o++] = ci[i];
      --ties_left;
    }
  }
}

void TopKSelector::select(std::span<const float> g, uint32_t k, std::vector<uint32_t>& out) {
  const size_t d = g.size();
  k = uint32_t(std::min<size_t>(k, d));
  if (k == 0) {
    out.clear();
    return;
  }
  if (k == d) {
    out.resize(d);
    std::iota(out.begin(), out.end(), 0u);
    return;
  }
  if (d >= kSampleMinDim) {
    for (unsigned widen = 0; widen < 2; ++widen) {
      collect(g, estimateThreshold(g, k, widen));
      if (count_ >= k) return pickExact(k, out);
    }
  }
  collect(g, 0);
  pickExact(k, out);
}

void TopKSelector::selectAtLeast(std::span<const float> g, uint32_t key,
                                 std::vector<uint32_t>& out) {
  collect(g, key);
  out.assign(cand_index_.get(), cand_index_.get() + count_);
}

}  // namespace tern::compression
