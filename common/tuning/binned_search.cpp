#include "common/tuning/binned_search.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/tuning/selection.hpp"

namespace tern::tuning {

BinnedSearch::Scan BinnedSearch::scan(std::span<const float> v) {
  // Allocated before the pass: nothing after it may throw and leave the lanes dirty.
  count_.assign(kBins, 0);
  s1_.assign(kBins, 0.0);
  largest_.assign(kBins, 0.0f);
  // Even and odd coordinates go to separate bins, so that runs of magnitudes in one bin do
  // not wait on each other's stores.
  double l2[kLanes] = {};
  uint32_t top[kLanes] = {}, bottom[kLanes];
  std::fill(bottom, bottom + kLanes, kAbsoluteBins);
  auto add = [&](size_t lane, float x) {
    const float a = std::fabs(x);
    const uint32_t bits = bitsOf(a);
    if (bits - 1u >= kInfinityBits - 1u) return;  // zero, infinite or NaN
    const uint32_t b = bits >> kMantissaDrop;
    Lane& h = lanes_[lane];
    ++h.count[b];
    h.s1[b] += a;
    h.largest[b] = std::max(h.largest[b], a);
    l2[lane] += static_cast<double>(a) * a;
    top[lane] = std::max(top[lane], b);
    bottom[lane] = std::min(bottom[lane], b);
  };
  size_t j = 0;
  for (; j + kLanes <= v.size(); j += kLanes)
    for (size_t lane = 0; lane < kLanes; ++lane) add(lane, v[j + lane]);
  for (; j < v.size(); ++j) add(0, v[j]);

  Scan s;
  double sq = 0.0;
  uint32_t low = kAbsoluteBins;
  for (size_t lane = 0; lane < kLanes; ++lane) {
    sq += l2[lane];
    s.top = std::max(s.top, top[lane]);
    low = std::min(low, bottom[lane]);
  }
  // The search's bin 0 holds the largest magnitudes; everything kBins - 1 bins below shares
  // the last.
  // Only the bins between the smallest and the largest magnitude were touched; they are
  // cleared again for the next scan.
  for (uint32_t b = low; b <= s.top && low < kAbsoluteBins; ++b) {
    const uint32_t k = std::min<uint32_t>(s.top - b, kBins - 1);
    for (Lane& h : lanes_) {
      count_[k] += h.count[b];
      s1_[k] += h.s1[b];
      largest_[k] = std::max(largest_[k], h.largest[b]);
      h.count[b] = 0;
      h.s1[b] = 0.0;
      h.largest[b] = 0.0f;
    }
  }
  double l1 = 0.0;
  for (double x : s1_) l1 += x;
  s.any = sq > 0.0;
  s.sparsity = s.any ? l1 * l1 / sq : 0.0;
  return s;
}

TuningDecision BinnedSearch::choose(std::span<const float> v, const Scan& s, uint32_t cap, double L,
                                    double eta, const compression::Compressor& comp,
                                    const costmodel::CostModel& cost) {
  const auto dim = static_cast<uint32_t>(v.size());
  const Pricing pricing{dim, L, eta, comp, cost};
  Best best;
  sweepBins(pricing, packetFills(dim, cap, comp, cost), cap, best);
  refineInside(v, s, pricing, best);
  return {best.level, best.price, pricing.improvement(best.sum, best.level), stepOr(eta, 1.0 / L),
          false};
}

void BinnedSearch::sweepBins(const Pricing& pricing, const std::vector<uint32_t>& fills,
                             uint32_t cap, Best& best) {
  inside_.clear();
  auto addInside = [&](uint32_t T, uint32_t k, uint32_t before, double s1_before) {
    const double s1_bound = s1_before + static_cast<double>(T - before) * largest_[k];
    const double c = pricing.costAt(T);
    inside_.push_back(
        {T, k, before, s1_before, c > 0.0 ? pricing.improvement(s1_bound, T) / c : 0.0});
  };
  uint32_t T = 0;
  double s1 = 0.0;
  size_t next_fill = 0;
  for (uint32_t k = 0; k < kBins; ++k) {
    if (count_[k] == 0) continue;
    const bool cut = uint64_t{T} + count_[k] > cap;
    const uint32_t end = cut ? cap : T + count_[k];
    // The packet-filling levels strictly inside (T, end).
    while (next_fill < fills.size() && fills[next_fill] <= T) ++next_fill;
    for (; next_fill < fills.size() && fills[next_fill] < end; ++next_fill)
      addInside(fills[next_fill], k, T, s1);
    if (cut) {
      if (end > T) addInside(end, k, T, s1);
      break;
    }
    T = end;
    s1 += s1_[k];
    best.consider(pricing, T, s1);
  }
}

void BinnedSearch::refineInside(std::span<const float> v, const Scan& s, const Pricing& pricing,
                                Best& best) {
  std::sort(inside_.begin(), inside_.end(),
            [](const Inside& a, const Inside& b) { return a.bound > b.bound; });
  uint32_t gathered = kBins;  // the bin whose magnitudes are in scratch_
  int exact = 0;
  for (const Inside& c : inside_) {
    if (c.bound <= best.ratio || exact == kMaxExact) break;
    ++exact;
    if (gathered != c.bin) {
      gatherBin(v, s.top, c.bin);
      gathered = c.bin;
    }
    const uint32_t n = c.level - c.before;
    std::nth_element(scratch_.begin(), scratch_.begin() + (n - 1), scratch_.end(),
                     std::greater<>());
    double part = 0.0;
    for (uint32_t j = 0; j < n; ++j) part += scratch_[j];
    best.consider(pricing, c.level, c.s1_before + part);
  }
}

void BinnedSearch::gatherBin(std::span<const float> v, uint32_t top, uint32_t bin) {
  scratch_.clear();
  for (float x : v) {
    const float a = std::fabs(x);
    if (!std::isfinite(a) || a == 0.0f) continue;
    if (binIndex(top, a) == bin) scratch_.push_back(a);
  }
}

const std::vector<uint32_t>& BinnedSearch::packetFills(uint32_t dim, uint32_t cap,
                                                       const compression::Compressor& comp,
                                                       const costmodel::CostModel& cost) {
  const size_t P = cost.packetBytes().value_or(0);
  const size_t overhead = cost.overheadBytes();
  if (P == fills_packet_ && overhead == fills_overhead_ && dim == fills_dim_ && cap == fills_cap_ &&
      comp.kind() == fills_compressor_)
    return fills_;
  fills_.clear();
  fills_packet_ = P;
  fills_overhead_ = overhead;
  fills_dim_ = dim;
  fills_cap_ = cap;
  fills_compressor_ = comp.kind();
  fills_ = packetSteps(comp, dim, cap, P, kMinLevelsPerPacket, overhead)
               .value_or(std::vector<uint32_t>{});
  return fills_;
}

}  // namespace tern::tuning
