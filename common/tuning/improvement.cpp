#include "common/tuning/improvement.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace tern::tuning {

std::optional<Scheme> schemeOf(compression::CompressorKind kind) {
  using compression::CompressorKind;
  switch (kind) {
    case CompressorKind::kTopK:
    case CompressorKind::kThreshold:
      return Scheme::kTopT;
    case CompressorKind::kRandomK:
      return Scheme::kUniform;
    case CompressorKind::kSq:
      return Scheme::kSignScale;
    case CompressorKind::kStochastic:
      return Scheme::kStochastic;
    case CompressorKind::kIdentity:
    case CompressorKind::kFp16:
    case CompressorKind::kQsgd:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Scheme> schemeOf(const std::string& compressor_name) {
  const auto kind = compression::compressorKindNamed(compressor_name);
  return kind ? schemeOf(*kind) : std::nullopt;
}

std::string schemeName(Scheme scheme) {
  switch (scheme) {
    case Scheme::kTopT:
      return "top-T";
    case Scheme::kSignScale:
      return "S+Q";
    case Scheme::kStochastic:
      return "stochastic";
    case Scheme::kUniform:
      return "random-T";
  }
  return "?";
}

double topTImprovement(const MagnitudeProfile& p, size_t T, double L) {
  return p.s2(T) / (2.0 * L);
}

double topTStep(double L) { return 1.0 / L; }

namespace {

// S+Q sends signs of the non-zero coordinates among the top T only (an exact zero has no sign):
// beyond the non-zeros, T adds nothing to S1 and the scale averages over the ones sent.
double signsSent(const MagnitudeProfile& p, size_t T) {
  return static_cast<double>(std::max<size_t>(1, std::min(T, p.nonZeros())));
}

}  // namespace

double signScaleImprovement(const MagnitudeProfile& p, size_t T, double L) {
  const double s1 = p.s1(T);
  return s1 * s1 / (2.0 * L * signsSent(p, T));
}

double signScaleStep(const MagnitudeProfile& p, size_t T, double L, double scale) {
  if (!(scale > 0.0)) return 0.0;  // nothing to step along
  return p.s1(T) / (L * signsSent(p, T) * scale);
}

double signScaleOf(const MagnitudeProfile& p, size_t T) { return p.s1(T) / signsSent(p, T); }

size_t stochasticSaturated(const MagnitudeProfile& p, size_t T) {
  assert(T >= 1 && T <= p.sortedCount());
  // The predicate is monotone in k (once coordinate k+1 is unsaturated so is every smaller
  // one), so the smallest k is found by bisection; k = T - 1 always satisfies it mathematically.
  size_t lo = 0, hi = T - 1;
  while (lo < hi) {
    const size_t k = lo + (hi - lo) / 2;
    if (static_cast<double>(T - k) * p.magnitude(k + 1) < p.tailL1(k))
      hi = k;
    else
      lo = k + 1;
  }
  return lo;
}

double stochasticOmega(const MagnitudeProfile& p, size_t T) {
  const double total2 = p.totalL2sq();
  if (T >= p.nonZeros() || total2 == 0.0) return 1.0;
  assert(T <= p.sortedCount());
  const size_t k = stochasticSaturated(p, T);
  // E||Q||^2 = sum_{saturated} g_j^2 + sum_{rest} |g_j| / lambda, lambda = (T - k) / tail(k).
  const double tail = p.tailL1(k);
  const double second_moment = p.s2(k) + tail * tail / static_cast<double>(T - k);
  return std::min(1.0, total2 / second_moment);
}

double stochasticOmegaUnsorted(std::span<const float> v, double T) {
  double total1 = 0.0, total2 = 0.0;
  size_t non_zeros = 0;
  for (float x : v) {
    const double a = std::fabs(static_cast<double>(x));
    if (!(a > 0.0)) continue;
    total1 += a;
    total2 += a * a;
    ++non_zeros;
  }
  if (total2 == 0.0 || T >= static_cast<double>(non_zeros)) return 1.0;
  // Fixed point of lambda = (T - k) / (mass of the unsaturated); k only grows, so it stops after
  // at most as many rounds as there are distinct saturation counts (a handful in practice).
  double lambda = T / total1;
  size_t k = 0;
  double sat2 = 0.0, unsat1 = total1;
  for (;;) {
    size_t k_new = 0;
    double sat2_new = 0.0, unsat1_new = 0.0;
    for (float x : v) {
      const double a = std::fabs(static_cast<double>(x));
      if (!(a > 0.0)) continue;
      if (lambda * a >= 1.0) {
        ++k_new;
        sat2_new += a * a;
      } else {
        unsat1_new += a;
      }
    }
    if (k_new == k || static_cast<double>(k_new) >= T || unsat1_new <= 0.0) break;
    k = k_new;
    sat2 = sat2_new;
    unsat1 = unsat1_new;
    lambda = (T - static_cast<double>(k)) / unsat1;
  }
  const double second_moment = sat2 + unsat1 / lambda;
  return std::min(1.0, total2 / second_moment);
}

double stochasticImprovement(const MagnitudeProfile& p, size_t T, double L) {
  return stochasticOmega(p, T) * p.totalL2sq() / (2.0 * L);
}

double stochasticStep(const MagnitudeProfile& p, size_t T, double L) {
  return stochasticOmega(p, T) / L;
}

namespace {
double keptFraction(const MagnitudeProfile& p, size_t T) {
  return p.dim() > 0 ? static_cast<double>(std::min(T, p.dim())) / static_cast<double>(p.dim())
                     : 0.0;
}
}  // namespace

double uniformImprovement(const MagnitudeProfile& p, size_t T, double L) {
  return keptFraction(p, T) * p.totalL2sq() / (2.0 * L);
}

double uniformStep(const MagnitudeProfile& p, size_t T, double L) { return keptFraction(p, T) / L; }

double biasedImprovement(double moment, double L, double eta) {
  if (eta == kBestStep) return moment / (2.0 * L);
  return eta * (1.0 - 0.5 * L * eta) * moment;
}

double unbiasedImprovement(double sq_norm, double omega, double L, double eta) {
  if (eta == kBestStep) return omega * sq_norm / (2.0 * L);
  return sq_norm * eta * (1.0 - 0.5 * L * eta / omega);
}

namespace {
// S1(T)^2 over the signs S+Q sends at `signs_at`: its moment E<g, Q> = ||Q||^2.
double signScaleMoment(double s1, const MagnitudeProfile& p, size_t signs_at) {
  return s1 * s1 / signsSent(p, signs_at);
}
}  // namespace

double improvement(Scheme scheme, const MagnitudeProfile& p, size_t T, double L, double eta) {
  if (eta == kBestStep) {
    switch (scheme) {
      case Scheme::kTopT:
        return topTImprovement(p, T, L);
      case Scheme::kSignScale:
        return signScaleImprovement(p, T, L);
      case Scheme::kStochastic:
        return stochasticImprovement(p, T, L);
      case Scheme::kUniform:
        return uniformImprovement(p, T, L);
    }
    return 0.0;
  }
  switch (scheme) {
    case Scheme::kTopT:
      return biasedImprovement(p.s2(T), L, eta);
    case Scheme::kSignScale:
      return biasedImprovement(signScaleMoment(p.s1(T), p, T), L, eta);
    case Scheme::kStochastic:
      return unbiasedImprovement(p.totalL2sq(), stochasticOmega(p, T), L, eta);
    case Scheme::kUniform:
      return unbiasedImprovement(p.totalL2sq(), keptFraction(p, T), L, eta);
  }
  return 0.0;
}

double step(Scheme scheme, const MagnitudeProfile& p, size_t T, double L, double eta) {
  if (eta != kBestStep) return eta;
  switch (scheme) {
    case Scheme::kTopT:
      return topTStep(L);
    case Scheme::kSignScale:
      return signScaleStep(p, T, L, signScaleOf(p, T));
    case Scheme::kStochastic:
      return stochasticStep(p, T, L);
    case Scheme::kUniform:
      return uniformStep(p, T, L);
  }
  return 0.0;
}

namespace {
// Rounding in omega (computed per T through a division) can put omega(T) a hair above the
// bound's omega where they are mathematically equal; near a zero of the bound at a step eta a
// relative margin on the result would not absorb it, one on omega does.
constexpr double kOmegaMargin = 1.0 + 1e-9;
}  // namespace

double improvementUpperBound(Scheme scheme, const MagnitudeProfile& p, size_t lo, size_t hi,
                             double L, double eta) {
  const size_t k = p.sortedCount();
  // Past the sorted prefix every magnitude is at most |g|_[k]: S1 and S2 grow at most that fast.
  const double a_k = k > 0 ? p.magnitude(k) : std::numeric_limits<double>::infinity();
  const double extra = static_cast<double>(hi > k ? hi - k : 0);
  // At a step past 2/L the biased bounds fall as their moment grows: the smallest moment in
  // [lo, hi] bounds them, S1 and S2 at lo (at least their values at k past the prefix).
  const bool falling = eta != kBestStep && biasedImprovement(1.0, L, eta) < 0.0;
  switch (scheme) {
    case Scheme::kTopT: {
      if (falling) return biasedImprovement(p.s2(std::min(lo, k)), L, eta);
      const double s2 = hi <= k ? p.s2(hi) : std::min(p.totalL2sq(), p.s2(k) + extra * a_k * a_k);
      return eta == kBestStep ? s2 / (2.0 * L) : biasedImprovement(s2, L, eta);
    }
    case Scheme::kSignScale: {
      if (falling) return biasedImprovement(signScaleMoment(p.s1(std::min(lo, k)), p, hi), L, eta);
      const double s1 = hi <= k ? p.s1(hi) : std::min(p.totalL1(), p.s1(k) + extra * a_k);
      if (eta == kBestStep) return s1 * s1 / (2.0 * L * signsSent(p, lo));
      return biasedImprovement(signScaleMoment(s1, p, lo), L, eta);
    }
    case Scheme::kStochastic: {
      double omega;
      if (hi <= k || hi >= p.nonZeros()) {
        if (eta == kBestStep) return stochasticImprovement(p, hi, L);
        omega = stochasticOmega(p, hi);
      } else {
        // Cauchy-Schwarz: sum g_j^2 / p_j >= (sum |g_j|)^2 / sum p_j, so omega(T) <= T ||g||^2 /
        // S1(d)^2.
        const double total1 = p.totalL1();
        omega = std::min(1.0, static_cast<double>(hi) * p.totalL2sq() / (total1 * total1));
        if (eta == kBestStep) return omega * p.totalL2sq() / (2.0 * L);
      }
      return unbiasedImprovement(p.totalL2sq(), std::min(1.0, omega * kOmegaMargin), L, eta);
    }
    case Scheme::kUniform:  // non-decreasing in T, and needs nothing sorted
      return improvement(scheme, p, hi, L, eta);
  }
  return 0.0;
}

double improvementOfWhole(Scheme scheme, const MagnitudeProfile& p, double L, double eta) {
  switch (scheme) {
    case Scheme::kTopT:
    case Scheme::kUniform:
    case Scheme::kStochastic:  // omega(d) = 1: every non-zero is sent exactly
      return eta == kBestStep ? p.totalL2sq() / (2.0 * L)
                              : biasedImprovement(p.totalL2sq(), L, eta);
    case Scheme::kSignScale:
      return eta == kBestStep ? p.totalL1() * p.totalL1() / (2.0 * L * signsSent(p, p.dim()))
                              : biasedImprovement(signScaleMoment(p.totalL1(), p, p.dim()), L, eta);
  }
  return 0.0;
}

}  // namespace tern::tuning
