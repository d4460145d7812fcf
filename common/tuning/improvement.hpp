#pragma once
// CAT's guaranteed objective improvement per compressor (papers/cat.md, eqs. 9, 12 and 15), for
// an L-smooth objective and a vector g (the gradient, plus error-feedback residual in tern):
//  - top-T:      improvement(T) = S2(T) / (2L),           step 1/L                      (eq. 9)
//  - S+Q:        improvement(T) = S1(T)^2 / (2 L T),      step S1(T) / (L T s)          (eq. 12)
//                for Q_T(g)_j = s * sign(g_j) on the top-T set;
//  - stochastic: improvement(T) = omega(T) ||g||^2 / (2L), step omega(T) / L            (eq. 15)
//                with p_j = min(1, lambda |g_j|), sum_j p_j = T, omega = ||g||^2 / sum g_j^2 / p_j
//                (Wangni et al. 2018); an expected improvement;
//  - random-T:   improvement(T) = (T/d) ||g||^2 / (2L),   step T / (d L)   [derived]
//                for T coordinates drawn uniformly and sent as (d/T) g_j, unbiased with
//                E||Q||^2 = (d/T) ||g||^2: the descent lemma's bound at its best step (stochastic
//                sparsification with every p_j = T/d, so omega = T/d); an expected improvement.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/tuning/magnitude_profile.hpp"

namespace tern::tuning {

enum class Scheme { kTopT, kSignScale, kStochastic, kUniform };

// The improvement function a compressor obeys: topk and threshold use the top-T form, sq the S+Q
// form, stochastic the omega form, randomk the random-T form; nullopt for compressors without a
// level.
std::optional<Scheme> schemeOf(const std::string& compressor_name);
// False for random-T, whose improvement needs no order of the magnitudes: searches skip sorting.
inline bool needsOrder(Scheme scheme) { return scheme != Scheme::kUniform; }
std::string schemeName(Scheme scheme);

double topTImprovement(const MagnitudeProfile& p, size_t T, double L);
double topTStep(double L);

double signScaleImprovement(const MagnitudeProfile& p, size_t T, double L);
// The best step for the scale s the compressor puts on every kept sign.
double signScaleStep(const MagnitudeProfile& p, size_t T, double L, double scale);

// Number of coordinates kept with probability one at expected count T (T < nonZeros(), and
// T <= sortedCount()): the smallest k with (T - k) |g|_[k+1] < sum_{j>k} |g|_[j].
size_t stochasticSaturated(const MagnitudeProfile& p, size_t T);
// omega(T) in (0, 1]; 1 once T reaches the number of non-zeros (everything is sent exactly).
double stochasticOmega(const MagnitudeProfile& p, size_t T);
// The same omega from the raw vector without sorting (O(d) per fixed-point round): for callers
// that reuse a level and still need the step it implies for this vector.
double stochasticOmegaUnsorted(std::span<const float> v, double T);
double stochasticImprovement(const MagnitudeProfile& p, size_t T, double L);
double stochasticStep(const MagnitudeProfile& p, size_t T, double L);
// Random-T: needs only ||g||^2 and d, no sorting.
double uniformImprovement(const MagnitudeProfile& p, size_t T, double L);
double uniformStep(const MagnitudeProfile& p, size_t T, double L);

// Dispatch on the scheme; T <= p.sortedCount() (or, for stochastic, T >= nonZeros()).
// For S+Q the step assumes the scale the sq compressor sends.
double improvement(Scheme scheme, const MagnitudeProfile& p, size_t T, double L);
double step(Scheme scheme, const MagnitudeProfile& p, size_t T, double L);
// The scale the sq compressor puts on each kept sign: the mean kept magnitude S1(T)/T.
double signScaleOf(const MagnitudeProfile& p, size_t T);

// An upper bound on the improvement over every T in [lo, hi]. Inside the sorted prefix it comes
// from the values at the ends (every improvement above is non-decreasing in T except S+Q's,
// bounded by S1(hi)^2 / lo); past it, from |g|_[k] bounding every unsorted magnitude and, for
// stochastic sparsification, omega(T) <= T ||g||^2 / S1(d)^2 (Cauchy-Schwarz).
double improvementUpperBound(Scheme scheme, const MagnitudeProfile& p, size_t lo, size_t hi,
                             double L);
// improvement(T = d) from the totals alone (nothing sorted): what sending everything buys.
double improvementOfWhole(Scheme scheme, const MagnitudeProfile& p, double L);

}  // namespace tern::tuning
