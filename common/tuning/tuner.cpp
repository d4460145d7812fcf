#include "common/tuning/tuner.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/compression/top_k_selection.hpp"
#include "common/tuning/improvement.hpp"
#include "common/tuning/selection.hpp"

namespace tern::tuning {
namespace {

// Magnitudes sorted up front by cat before its first T* is known.
constexpr size_t kInitialSorted = 512;

// The step a decision reports: the best step (1/L for what sends everything exactly), or eta.
double stepOr(double eta, double best) { return eta == kBestStep ? best : eta; }

uint32_t levelLimit(size_t dim, uint32_t cap, double eta) {
  if (!(eta >= 0.0) || !std::isfinite(eta))
    throw std::invalid_argument("tuner: step must be finite and >= 0 (0 = the best step)");
  if (dim == 0) throw std::invalid_argument("tuner: empty vector");
  if (dim > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument("tuner: dimension does not fit the wire's 32-bit levels");
  const auto d = static_cast<uint32_t>(dim);
  return cap == 0 ? d : std::min(d, cap);
}

// ||v||_1^2 / ||v||_2^2, in [1, d]: the number of equal magnitudes that would give v's norms.
double effectiveSparsity(std::span<const float> v) {
  double l1 = 0.0, l2 = 0.0;
  for (float x : v) {
    const double a = std::fabs(static_cast<double>(x));
    if (!std::isfinite(a)) continue;
    l1 += a;
    l2 += a * a;
  }
  return l2 > 0.0 ? l1 * l1 / l2 : 0.0;
}

// Non-finite entries count as zero (MagnitudeProfile zeroes NaN; an infinity here would make
// every level's report infinite).
double squaredNorm(std::span<const float> v) {
  double s = 0.0;
  for (float x : v)
    if (std::isfinite(x)) s += static_cast<double>(x) * x;
  return s;
}

double predictedCost(const compression::Compressor& comp, const costmodel::CostModel& cost,
                     size_t dim, uint32_t level) {
  return cost.cost(comp.encodedBytes(static_cast<uint32_t>(dim), level));
}

// Compressors without a level send everything they are given: the descent of a full step.
TuningDecision levelFreeDecision(std::span<const float> v, uint32_t level,
                                 const compression::Compressor& comp,
                                 const costmodel::CostModel& cost, double L, double eta) {
  return {level, predictedCost(comp, cost, v.size(), level),
          biasedImprovement(squaredNorm(v), L, eta), stepOr(eta, 1.0 / L), true};
}

// The decision at `level`, from a profile sorted at least that far (it is extended if not).
TuningDecision decisionAt(Scheme scheme, MagnitudeProfile& p, uint32_t level, double L, double eta,
                          const compression::Compressor& comp, const costmodel::CostModel& cost) {
  const double c = predictedCost(comp, cost, p.dim(), level);
  if (level >= p.dim()) {
    // Everything is sent: the totals suffice, and every scheme's best step is 1/L there
    // (S+Q's scale is the mean magnitude, stochastic's omega is 1).
    return {level, c, improvementOfWhole(scheme, p, L, eta), stepOr(eta, 1.0 / L), true};
  }
  if (needsOrder(scheme)) p.sortAtLeast(level);
  return {level, c, improvement(scheme, p, level, L, eta), step(scheme, p, level, L, eta), true};
}

// A decision at a level chosen beforehand (fixed, full under a cap). Top-T and S+Q need only
// S1(T) and S2(T), sums over the T largest magnitudes, not their order: the compressors' own
// top-k selection (a fraction of nth_element's time) replaces the profile's sort and prefix
// sums. Stochastic sparsification needs the order (its saturated count) and goes through the
// profile, as does a vector whose top T holds a NaN (the profile counts NaN as zero).
struct LevelScratch {
  compression::TopKSelector selector;
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

TuningDecision decisionAtLevel(Scheme scheme, std::span<const float> v, uint32_t level, double L,
                               double eta, const compression::Compressor& comp,
                               const costmodel::CostModel& cost, LevelScratch& scratch) {
  auto viaProfile = [&] {
    MagnitudeProfile p(v, level < v.size() ? level : 0);
    return decisionAt(scheme, p, level, L, eta, comp, cost);
  };
  if (scheme == Scheme::kUniform) {
    // Random-T needs only ||v||^2: nothing to select.
    const MagnitudeProfile p(v, 0);
    return {level, predictedCost(comp, cost, v.size(), level),
            improvement(scheme, p, level, L, eta), step(scheme, p, level, L, eta), true};
  }
  if (scheme == Scheme::kStochastic || level >= v.size()) return viaProfile();
  scratch.selector.select(v, level, scratch.indices, scratch.values);
  double s1 = 0.0, s2 = 0.0;
  size_t signs = 0;  // non-zeros among the top T: S+Q sends no sign for an exact zero
  for (float x : scratch.values) {
    const double a = std::fabs(static_cast<double>(x));
    if (std::isnan(a)) return viaProfile();
    s1 += a;
    s2 += a * a;
    signs += a != 0.0;
  }
  const double c = predictedCost(comp, cost, v.size(), level);
  if (scheme == Scheme::kTopT)
    return {level, c, eta == kBestStep ? s2 / (2.0 * L) : biasedImprovement(s2, L, eta),
            stepOr(eta, 1.0 / L), true};
  // S+Q: improvement S1^2 / (2 L T') over the T' signs sent; for the scale S1 / T' the
  // compressor sends, the best step S1 / (L T' scale) is 1/L (0 when nothing is kept).
  const double sent = static_cast<double>(std::max<size_t>(1, signs));
  if (eta != kBestStep) return {level, c, biasedImprovement(s1 * s1 / sent, L, eta), eta, true};
  return {level, c, s1 * s1 / (2.0 * L * sent), s1 > 0.0 ? 1.0 / L : 0.0, true};
}

// The hybrid's step between S+Q's full recomputes (S+Q's T* moves from push to push where
// top-T's stays put). One pass over the vector bins the magnitudes by their float exponent and
// top three mantissa bits (1/8 octave, no logarithm), keeping count, S1 and the largest
// magnitude per bin, and ||v||_2^2 for the drift check. A scan from the largest bin down
// evaluates S1^2 / (2 L T) / C(T) at every bin boundary (the levels a threshold there would
// keep). Levels inside a bin that can matter, the last level of each packet count (the level
// that fills the packets it pays for) and the cap when it cuts a bin, get an upper bound from
// the bin's largest magnitude; those whose bound beats the best ratio found are evaluated
// exactly, best bound first and at most kMaxExact of them, by a selection among that bin's
// magnitudes only. No sort; the improvement is exact for what the level keeps, only the choice
// among levels is coarser than the full search's.
class BinnedSearch {
 public:
  struct Scan {
    bool any = false;       // some magnitude is finite and nonzero
    uint32_t top = 0;       // bin of the largest
    double sparsity = 0.0;  // ||v||_1^2 / ||v||_2^2, as effectiveSparsity computes it
  };

  // The one pass over v; choose() then works from the bins it kept.
  Scan scan(std::span<const float> v) {
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

  // `s` is the last scan() this object made, with s.any set. eta: kBestStep, or a step below
  // 2/L (where the improvement is a positive multiple of S1^2 / T).
  TuningDecision choose(std::span<const float> v, const Scan& s, uint32_t cap, double L, double eta,
                        const compression::Compressor& comp, const costmodel::CostModel& cost) {
    const auto dim = static_cast<uint32_t>(v.size());
    auto costAt = [&](uint32_t T) { return predictedCost(comp, cost, dim, T); };
    auto improvementOf = [&](double s1, uint32_t T) {
      if (eta != kBestStep) return biasedImprovement(s1 * s1 / static_cast<double>(T), L, eta);
      return s1 * s1 / (2.0 * L * static_cast<double>(T));
    };
    uint32_t best_level = 0;
    double best_s1 = 0.0, best_cost = 0.0, best_ratio = -1.0;
    auto consider = [&](uint32_t T, double s1) {
      const double c = costAt(T);
      const double ratio = c > 0.0 ? improvementOf(s1, T) / c : 0.0;
      if (ratio > best_ratio || (ratio == best_ratio && T < best_level)) {
        best_ratio = ratio;
        best_level = T;
        best_s1 = s1;
        best_cost = c;
      }
    };

    const std::vector<uint32_t>& fills = packetFills(dim, cap, comp, cost);
    inside_.clear();
    auto addInside = [&](uint32_t T, uint32_t k, uint32_t before, double s1_before) {
      const double s1_bound = s1_before + static_cast<double>(T - before) * largest_[k];
      const double c = costAt(T);
      inside_.push_back({T, k, before, s1_before, c > 0.0 ? improvementOf(s1_bound, T) / c : 0.0});
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
      consider(T, s1);
    }

    std::sort(inside_.begin(), inside_.end(),
              [](const Inside& a, const Inside& b) { return a.bound > b.bound; });
    uint32_t gathered = kBins;  // the bin whose magnitudes are in scratch_
    int exact = 0;
    for (const Inside& c : inside_) {
      if (c.bound <= best_ratio || exact == kMaxExact) break;
      ++exact;
      if (gathered != c.bin) {
        scratch_.clear();
        for (float x : v) {
          const float a = std::fabs(x);
          if (!std::isfinite(a) || a == 0.0f) continue;
          if (binIndex(s.top, a) == c.bin) scratch_.push_back(a);
        }
        gathered = c.bin;
      }
      const uint32_t n = c.level - c.before;
      std::nth_element(scratch_.begin(), scratch_.begin() + (n - 1), scratch_.end(),
                       std::greater<>());
      double part = 0.0;
      for (uint32_t j = 0; j < n; ++j) part += scratch_[j];
      consider(c.level, c.s1_before + part);
    }
    return {best_level, best_cost, improvementOf(best_s1, best_level), stepOr(eta, 1.0 / L), false};
  }

 private:
  static constexpr uint32_t kBins = 256;  // 32 octaves at 8 bins each
  static constexpr double kMinLevelsPerPacket = 64.0;
  static constexpr int kMaxExact = 4;            // selections inside bins per choice, at most
  static constexpr uint32_t kMantissaDrop = 20;  // keep 3 of 23 mantissa bits
  static constexpr uint32_t kInfinityBits = 0x7f800000u;  // the bits of +infinity
  static constexpr uint32_t kAbsoluteBins = (kInfinityBits >> kMantissaDrop) + 1;
  static constexpr size_t kLanes = 2;
  struct Lane {
    std::array<uint32_t, kAbsoluteBins> count;
    std::array<double, kAbsoluteBins> s1;
    std::array<float, kAbsoluteBins> largest;
  };
  struct Inside {
    uint32_t level, bin, before;  // the level, its bin, the level at the bin's upper boundary
    double s1_before;             // S1 of the bins above
    double bound;                 // upper bound on the ratio at `level`
  };
  // The last level of each packet count below `cap` (levels that fill the packets they pay
  // for), kept from call to call while the compressor, dimension, cap and packet size stay.
  // Empty without packets, or when a packet holds so few levels that the cost is close to
  // affine and bin boundaries suffice.
  const std::vector<uint32_t>& packetFills(uint32_t dim, uint32_t cap,
                                           const compression::Compressor& comp,
                                           const costmodel::CostModel& cost) {
    const size_t P = cost.packetBytes().value_or(0);
    const size_t overhead = cost.overheadBytes();
    if (P == fills_packet_ && overhead == fills_overhead_ && dim == fills_dim_ &&
        cap == fills_cap_ && comp.name() == fills_compressor_)
      return fills_;
    fills_.clear();
    fills_packet_ = P;
    fills_overhead_ = overhead;
    fills_dim_ = dim;
    fills_cap_ = cap;
    fills_compressor_ = comp.name();
    fills_ = packetSteps(comp, dim, cap, P, kMinLevelsPerPacket, overhead)
                 .value_or(std::vector<uint32_t>{});
    return fills_;
  }

  static uint32_t bitsOf(float a) {
    uint32_t bits;
    std::memcpy(&bits, &a, sizeof bits);
    return bits;
  }
  // Exponent and the top three mantissa bits of a positive float: monotone in the value.
  static uint32_t binOf(float a) { return bitsOf(a) >> kMantissaDrop; }
  // Bin 0 holds the largest magnitudes; everything kBins - 1 bins below shares the last.
  static uint32_t binIndex(uint32_t top, float a) {
    return std::min<uint32_t>(top - binOf(a), kBins - 1);
  }
  std::array<Lane, kLanes> lanes_{};  // scan()'s bins, by absolute bin; zero between scans
  std::vector<uint32_t> count_;
  std::vector<double> s1_;
  std::vector<float> largest_;
  std::vector<Inside> inside_;
  std::vector<float> scratch_;  // the magnitudes of one bin
  std::vector<uint32_t> fills_;
  size_t fills_packet_ = 0;
  size_t fills_overhead_ = 0;
  uint32_t fills_dim_ = 0, fills_cap_ = 0;
  std::string fills_compressor_;
};

std::optional<Scheme> levelScheme(const compression::Compressor& comp) {
  if (!comp.hasLevel()) return std::nullopt;
  return schemeOf(comp.name());
}

class CatTuner final : public Tuner {
 public:
  CatTuner(uint32_t recompute_every, double drift, double L)
      : recompute_every_(recompute_every), drift_(drift), L_(L) {}
  std::string name() const override { return "cat"; }

  TuningDecision choose(std::span<const float> v, uint32_t cap, const compression::Compressor& comp,
                        const costmodel::CostModel& cost, double gradient_sq_norm,
                        double base_improvement, double eta) override {
    const uint32_t m = levelLimit(v.size(), cap, eta);
    const auto scheme = levelScheme(comp);
    if (!scheme) return levelFreeDecision(v, m, comp, cost, L_, eta);

    // A new step reprices every level (and past 2/L reverses the biased ones' order).
    bool reusable = last_ && calls_since_ < recompute_every_ && cap == cap_ && v.size() == dim_ &&
                    *scheme == scheme_ && eta == eta_;
    // A cost model whose shape moved (a link fitted for the first time, or changed) prices
    // levels differently: T* of the old shape can be far off (a scale factor alone is not).
    if (reusable) {
      const CostShape now = costShape(comp, cost, v.size(), last_->level, m);
      reusable = !now.movedFrom(cost_shape_);
    }
    auto drifted = [&](double now) { return now > shape_ * drift_ || now < shape_ / drift_; };
    if (reusable && *scheme == Scheme::kSignScale && base_improvement == 0.0 &&
        gradient_sq_norm < 0.0 && (eta == kBestStep || biasedImprovement(1.0, L_, eta) > 0.0)) {
      // S+Q between recomputes: the level follows the vector through its magnitude bins.
      const BinnedSearch::Scan s = binned_.scan(v);
      if (s.any && !(shape_ > 0.0 && drifted(s.sparsity))) {
        ++calls_since_;
        return binned_.choose(v, s, m, L_, eta, comp, cost);
      }
      reusable = false;
    }
    // Early recompute: the vector's effective sparsity moved by more than the drift factor.
    if (reusable && shape_ > 0.0) reusable = !drifted(effectiveSparsity(v));
    if (reusable) {
      ++calls_since_;
      TuningDecision d = *last_;
      d.recomputed = false;
      d.predicted_cost = predictedCost(comp, cost, v.size(), d.level);
      if (*scheme == Scheme::kStochastic) {
        // The step must match this vector: a stale omega could overshoot.
        const double omega = stochasticOmegaUnsorted(v, d.level);
        d.step = stepOr(eta, omega / L_);
        d.predicted_improvement =
            base_improvement + unbiasedImprovement(squaredNorm(v), omega, L_, eta);
      } else if (*scheme == Scheme::kUniform) {
        const double kept = double(d.level) / double(v.size());
        d.predicted_improvement =
            base_improvement + unbiasedImprovement(squaredNorm(v), kept, L_, eta);
      }
      return d;
    }

    // Sort about what the last T* needed; the search sorts more only if it must.
    const size_t guess = last_ ? 2 * size_t{last_->level} : kInitialSorted;
    MagnitudeProfile p(
        v, needsOrder(*scheme) ? std::min<size_t>(m, std::max(guess, kInitialSorted)) : 0);
    const double credit = gradient_sq_norm >= 0.0 ? gradient_sq_norm / (2.0 * L_)
                                                  : std::numeric_limits<double>::infinity();
    const Selection s = selectLevel(*scheme, p, L_, m, comp, cost, credit, base_improvement, eta);
    const double st =
        s.level >= v.size() ? stepOr(eta, 1.0 / L_) : step(*scheme, p, s.level, L_, eta);
    last_ = TuningDecision{s.level, s.cost, s.improvement, st, true};
    calls_since_ = 1;
    if (recompute_every_ > 1 && drift_ > 0.0) shape_ = effectiveSparsity(v);
    cap_ = cap;
    dim_ = v.size();
    scheme_ = *scheme;
    eta_ = eta;
    if (recompute_every_ > 1) cost_shape_ = costShape(comp, cost, v.size(), s.level, m);
    return *last_;
  }

 private:
  // C(T*) and C(limit) relative to C(1): what the argmax depends on (not the cost's unit).
  struct CostShape {
    double at_level = 0.0, at_limit = 0.0;
    bool movedFrom(const CostShape& o) const {
      auto moved = [](double a, double b) {
        return !(a > 0.0 && b > 0.0) ? a != b : a > b * kCostShapeDrift || a < b / kCostShapeDrift;
      };
      return moved(at_level, o.at_level) || moved(at_limit, o.at_limit);
    }
  };
  static constexpr double kCostShapeDrift = 1.25;
  static CostShape costShape(const compression::Compressor& comp, const costmodel::CostModel& cost,
                             size_t dim, uint32_t level, uint32_t limit) {
    const double one = predictedCost(comp, cost, dim, 1);
    if (!(one > 0.0)) return {};
    return {predictedCost(comp, cost, dim, level) / one,
            predictedCost(comp, cost, dim, limit) / one};
  }

  uint32_t recompute_every_;
  double drift_;  // > 1: recompute early once the effective sparsity moves by this factor
  double L_;
  std::optional<TuningDecision> last_;
  BinnedSearch binned_;
  double shape_ = 0.0;  // effective sparsity of the vector T* was last computed for
  uint32_t calls_since_ = 0;
  uint32_t cap_ = 0;
  size_t dim_ = 0;
  Scheme scheme_ = Scheme::kTopT;
  double eta_ = kBestStep;  // the step T* was computed for
  CostShape cost_shape_;
};

class FixedTuner final : public Tuner {
 public:
  FixedTuner(uint32_t level, double L) : level_(level), L_(L) {}
  std::string name() const override { return "fixed"; }

  TuningDecision choose(std::span<const float> v, uint32_t cap, const compression::Compressor& comp,
                        const costmodel::CostModel& cost, double /*gradient_sq_norm*/,
                        double /*base_improvement*/, double eta) override {
    const uint32_t m = levelLimit(v.size(), cap, eta);
    const uint32_t level = level_ == 0 ? m : std::min(level_, m);
    const auto scheme = levelScheme(comp);
    if (!scheme) return levelFreeDecision(v, m, comp, cost, L_, eta);
    return decisionAtLevel(*scheme, v, level, L_, eta, comp, cost, scratch_);
  }

 private:
  uint32_t level_;
  double L_;
  LevelScratch scratch_;  // reused from push to push
};

class DynamicTuner final : public Tuner {
 public:
  explicit DynamicTuner(double L) : L_(L) {}
  std::string name() const override { return "dynamic"; }

  TuningDecision choose(std::span<const float> v, uint32_t cap, const compression::Compressor& comp,
                        const costmodel::CostModel& cost, double /*gradient_sq_norm*/,
                        double /*base_improvement*/, double eta) override {
    const uint32_t m = levelLimit(v.size(), cap, eta);
    const auto scheme = levelScheme(comp);
    if (!scheme) return levelFreeDecision(v, m, comp, cost, L_, eta);
    const uint32_t limit = std::min(m, dynamicMaxLevel(v.size()));
    MagnitudeProfile p(v, limit);
    return decisionAt(*scheme, p, dynamicLevel(p, limit), L_, eta, comp, cost);
  }

 private:
  double L_;
};

class FullTuner final : public Tuner {
 public:
  explicit FullTuner(double L) : L_(L) {}
  std::string name() const override { return "full"; }

  TuningDecision choose(std::span<const float> v, uint32_t cap, const compression::Compressor& comp,
                        const costmodel::CostModel& cost, double /*gradient_sq_norm*/,
                        double /*base_improvement*/, double eta) override {
    const uint32_t m = levelLimit(v.size(), cap, eta);
    const auto scheme = levelScheme(comp);
    if (!scheme) return levelFreeDecision(v, m, comp, cost, L_, eta);
    return decisionAtLevel(*scheme, v, m, L_, eta, comp, cost, scratch_);
  }

 private:
  double L_;
  LevelScratch scratch_;
};

}  // namespace

uint32_t dynamicMaxLevel(size_t dim) {
  auto r = static_cast<uint64_t>(std::sqrt(static_cast<double>(dim)));
  while (r * r < dim) ++r;
  while (r > 0 && (r - 1) * (r - 1) >= dim) --r;
  return static_cast<uint32_t>(std::max<uint64_t>(r, 1));
}

uint32_t dynamicLevel(const MagnitudeProfile& p, uint32_t max_level) {
  const double norm = std::sqrt(p.totalL2sq());
  for (uint32_t T = 1; T <= max_level; ++T)
    if (p.s1(T) >= norm) return T;
  return max_level;
}

std::unique_ptr<Tuner> makeTuner(const TunerSpec& spec) {
  if (!(spec.smoothness > 0.0) || !std::isfinite(spec.smoothness))
    throw std::invalid_argument("tuner: smoothness must be finite and > 0");
  if (spec.name == "cat") {
    if (spec.recompute_every == 0)
      throw std::invalid_argument("tuner: recompute_every must be >= 1");
    if (!(spec.recompute_drift == 0.0 || spec.recompute_drift > 1.0))
      throw std::invalid_argument("tuner: recompute_drift must be 0 (off) or > 1");
    return std::make_unique<CatTuner>(spec.recompute_every, spec.recompute_drift, spec.smoothness);
  }
  if (spec.name == "fixed") return std::make_unique<FixedTuner>(spec.fixed_level, spec.smoothness);
  if (spec.name == "dynamic") return std::make_unique<DynamicTuner>(spec.smoothness);
  if (spec.name == "full") return std::make_unique<FullTuner>(spec.smoothness);
  throw std::invalid_argument("unknown tuner '" + spec.name +
                              "' (expected cat, fixed, dynamic or full)");
}

std::vector<std::string> tunerNames() { return {"cat", "fixed", "dynamic", "full"}; }

}  // namespace tern::tuning
