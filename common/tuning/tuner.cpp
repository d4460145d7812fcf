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
#include "common/tuning/binned_search.hpp"
#include "common/tuning/improvement.hpp"
#include "common/tuning/selection.hpp"
#include "common/util/float_passes.hpp"

namespace tern::tuning {
namespace {

// Magnitudes sorted up front by cat before its first T* is known.
constexpr size_t kInitialSorted = 512;

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
  // A finite float's square is finite in double, so a non-finite sum says non-finite values were
  // there: only then is it taken again, skipping them.
  const double plain = laneSumOfSquares(v);
  if (std::isfinite(plain)) return plain;
  return laneSum(v, [](float x) { return std::isfinite(x) ? static_cast<double>(x) * x : 0.0; });
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

std::optional<Scheme> levelScheme(const compression::Compressor& comp) {
  if (!comp.hasLevel()) return std::nullopt;
  return schemeOf(comp.kind());
}

class CatTuner final : public Tuner {
 public:
  CatTuner(uint32_t recompute_every, double drift, double L, bool price_fresh)
      : recompute_every_(recompute_every), drift_(drift), L_(L), price_fresh_(price_fresh) {}
  std::string name() const override { return price_fresh_ ? "cat" : "cat-paper"; }

  TuningDecision choose(std::span<const float> sent_from, uint32_t cap,
                        const compression::Compressor& comp, const costmodel::CostModel& cost,
                        double gradient_sq_norm, double base_improvement, double eta,
                        std::span<const float> fresh) override {
    if (!fresh.empty() && fresh.size() != sent_from.size())
      throw std::invalid_argument("tuner: the fresh gradient's size differs from the vector's");
    // Every level is priced on v; only the level reaches the compressor, which sends from
    // sent_from.
    const std::span<const float> v = price_fresh_ && !fresh.empty() ? fresh : sent_from;
    const uint32_t m = levelLimit(v.size(), cap, eta);
    const auto scheme = levelScheme(comp);
    if (!scheme) return levelFreeDecision(v, m, comp, cost, L_, eta);
    const Call call{v, cap, m, *scheme, comp, cost, gradient_sq_norm, base_improvement, eta};
    if (auto reused = reuse(call)) return *reused;
    return recompute(call);
  }

 private:
  // One call's inputs; m is the most coordinates it may send.
  struct Call {
    std::span<const float> v;
    uint32_t cap;
    uint32_t m;
    Scheme scheme;
    const compression::Compressor& comp;
    const costmodel::CostModel& cost;
    double gradient_sq_norm;
    double base_improvement;
    double eta;
  };

  // Whether the vector's effective sparsity moved by more than the drift factor.
  bool drifted(double sparsity) const {
    return sparsity > shape_ * drift_ || sparsity < shape_ / drift_;
  }

  // The decision between recomputes, or nullopt when T* must be recomputed.
  std::optional<TuningDecision> reuse(const Call& c) {
    // A new step reprices every level (and past 2/L reverses the biased ones' order).
    bool reusable = last_ && calls_since_ < recompute_every_ && c.cap == cap_ &&
                    c.v.size() == dim_ && c.scheme == scheme_ && c.eta == eta_;
    // A cost model whose shape moved (a link fitted for the first time, or changed) prices
    // levels differently: T* of the old shape can be far off (a scale factor alone is not).
    if (reusable) {
      const CostShape now = costShape(c.comp, c.cost, c.v.size(), last_->level, c.m);
      reusable = !now.movedFrom(cost_shape_);
    }
    if (reusable && c.scheme == Scheme::kSignScale && c.base_improvement == 0.0 &&
        c.gradient_sq_norm < 0.0 &&
        (c.eta == kBestStep || biasedImprovement(1.0, L_, c.eta) > 0.0)) {
      // S+Q between recomputes: the level follows the vector through its magnitude bins.
      const BinnedSearch::Scan s = binned_.scan(c.v);
      if (s.any && !(shape_ > 0.0 && drifted(s.sparsity))) {
        ++calls_since_;
        return binned_.choose(c.v, s, c.m, L_, c.eta, c.comp, c.cost);
      }
      reusable = false;
    }
    // Early recompute: the vector's effective sparsity moved by more than the drift factor.
    if (reusable && shape_ > 0.0) reusable = !drifted(effectiveSparsity(c.v));
    if (!reusable) return std::nullopt;
    return lastDecision(c);
  }

  // T* of the last recompute, priced for this call.
  TuningDecision lastDecision(const Call& c) {
    ++calls_since_;
    TuningDecision d = *last_;
    d.recomputed = false;
    d.predicted_cost = predictedCost(c.comp, c.cost, c.v.size(), d.level);
    if (c.scheme == Scheme::kStochastic) {
      // The step must match this vector: a stale omega could overshoot.
      const double omega = stochasticOmegaUnsorted(c.v, d.level);
      d.step = stepOr(c.eta, omega / L_);
      d.predicted_improvement =
          c.base_improvement + unbiasedImprovement(squaredNorm(c.v), omega, L_, c.eta);
    } else if (c.scheme == Scheme::kUniform) {
      const double kept = double(d.level) / double(c.v.size());
      d.predicted_improvement =
          c.base_improvement + unbiasedImprovement(squaredNorm(c.v), kept, L_, c.eta);
    }
    return d;
  }

  // The full search for T*, remembered for the calls until the next recompute.
  TuningDecision recompute(const Call& c) {
    // Sort about what the last T* needed; the search sorts more only if it must.
    const size_t guess = last_ ? 2 * size_t{last_->level} : kInitialSorted;
    MagnitudeProfile p(
        c.v, needsOrder(c.scheme) ? std::min<size_t>(c.m, std::max(guess, kInitialSorted)) : 0);
    const double credit = c.gradient_sq_norm >= 0.0 ? c.gradient_sq_norm / (2.0 * L_)
                                                    : std::numeric_limits<double>::infinity();
    const Selection s =
        selectLevel(c.scheme, p, L_, c.m, c.comp, c.cost, credit, c.base_improvement, c.eta);
    const double st =
        s.level >= c.v.size() ? stepOr(c.eta, 1.0 / L_) : step(c.scheme, p, s.level, L_, c.eta);
    last_ = TuningDecision{s.level, s.cost, s.improvement, st, true};
    calls_since_ = 1;
    if (recompute_every_ > 1 && drift_ > 0.0) shape_ = effectiveSparsity(c.v);
    cap_ = c.cap;
    dim_ = c.v.size();
    scheme_ = c.scheme;
    eta_ = c.eta;
    if (recompute_every_ > 1) cost_shape_ = costShape(c.comp, c.cost, c.v.size(), s.level, c.m);
    return *last_;
  }

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
  bool price_fresh_;  // cat: levels priced on the fresh gradient when one is given
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
                        double /*base_improvement*/, double eta,
                        std::span<const float> /*fresh*/) override {
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
                        double /*base_improvement*/, double eta,
                        std::span<const float> /*fresh*/) override {
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
                        double /*base_improvement*/, double eta,
                        std::span<const float> /*fresh*/) override {
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
  switch (spec.kind) {
    case TunerKind::kCat:
    case TunerKind::kCatPaper:
      if (spec.recompute_every == 0)
        throw std::invalid_argument("tuner: recompute_every must be >= 1");
      if (!(spec.recompute_drift == 0.0 || spec.recompute_drift > 1.0))
        throw std::invalid_argument("tuner: recompute_drift must be 0 (off) or > 1");
      return std::make_unique<CatTuner>(spec.recompute_every, spec.recompute_drift, spec.smoothness,
                                        spec.kind == TunerKind::kCat);
    case TunerKind::kFixed:
      return std::make_unique<FixedTuner>(spec.fixed_level, spec.smoothness);
    case TunerKind::kDynamic:
      return std::make_unique<DynamicTuner>(spec.smoothness);
    case TunerKind::kFull:
      return std::make_unique<FullTuner>(spec.smoothness);
  }
  return nullptr;
}

std::vector<std::string> tunerNames() { return {"cat", "cat-paper", "fixed", "dynamic", "full"}; }

}  // namespace tern::tuning
