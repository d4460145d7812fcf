#pragma once
// CAT's guaranteed objective improvement per compressor (docs/cat.md, method: the paper's eqs. 9,
// 12 and 15), for
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
// Those are the bounds at each compressor's best step. The receiver may step by its own eta
// instead (the coordinator's learning rate); the descent lemma then bounds the decrease by
// eta <g, Q> - L eta^2 E||Q||^2 / 2 [derived]:
//  - top-T:      eta (1 - L eta / 2) S2(T)
//  - S+Q:        eta (1 - L eta / 2) S1(T)^2 / T            (with the scale S1(T) / T)
//  - stochastic: eta ||g||^2 (1 - L eta / (2 omega(T)))     (E||Q||^2 = ||g||^2 / omega(T))
//  - random-T:   eta ||g||^2 (1 - L eta d / (2 T))
// each equal to the best step's bound at eta = 1/L (top-T, S+Q) or omega(T)/L (stochastic), and
// negative where the step overshoots (eta >= 2/L for the biased ones; small T for the unbiased).
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/compression/compressor.hpp"
#include "common/tuning/magnitude_profile.hpp"

namespace tern::tuning {

enum class Scheme { kTopT, kSignScale, kStochastic, kUniform };

// The step argument `eta` of the functions below: kBestStep (0) = each compressor's best step,
// the paper's; a positive eta = the step the receiver applies, whatever T is.
inline constexpr double kBestStep = 0.0;
// The step a decision reports: `best` (1/L for what sends everything exactly) under kBestStep,
// else eta.
inline double stepOr(double eta, double best) { return eta == kBestStep ? best : eta; }

// The bound for a compressor whose E<g, Q> = E||Q||^2 = moment (top-T: S2(T); S+Q: S1(T)^2 / T):
// moment / (2L) at the best step 1/L, eta (1 - L eta / 2) moment at eta.
double biasedImprovement(double moment, double L, double eta);
// The bound for an unbiased compressor with E||Q||^2 = ||g||^2 / omega: omega ||g||^2 / (2L) at
// the best step omega/L, eta ||g||^2 (1 - L eta / (2 omega)) at eta.
double unbiasedImprovement(double sq_norm, double omega, double L, double eta);

// The improvement function a compressor obeys: topk and threshold use the top-T form, sq the S+Q
// form, stochastic the omega form, randomk the random-T form; nullopt for compressors without a
// level.
std::optional<Scheme> schemeOf(compression::CompressorKind kind);
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
// For S+Q the step assumes the scale the sq compressor sends. eta: see kBestStep; step() returns
// the best step, or eta itself when one is given.
double improvement(Scheme scheme, const MagnitudeProfile& p, size_t T, double L,
                   double eta = kBestStep);
double step(Scheme scheme, const MagnitudeProfile& p, size_t T, double L, double eta = kBestStep);
// The scale the sq compressor puts on each kept sign: the mean kept magnitude S1(T)/T.
double signScaleOf(const MagnitudeProfile& p, size_t T);

// An upper bound on the improvement over every T in [lo, hi]. Inside the sorted prefix it comes
// from the values at the ends (every improvement above is non-decreasing in T except S+Q's,
// bounded by S1(hi)^2 / lo); past it, from |g|_[k] bounding every unsorted magnitude and, for
// stochastic sparsification, omega(T) <= T ||g||^2 / S1(d)^2 (Cauchy-Schwarz). At a step eta
// the unbiased bounds still grow with omega, hence with T; the biased ones are their moment
// times eta (1 - L eta / 2), and where that factor is negative the bound comes from the
// smallest moment in the range instead (S2(lo); S1(lo)^2 over the signs sent at hi).
double improvementUpperBound(Scheme scheme, const MagnitudeProfile& p, size_t lo, size_t hi,
                             double L, double eta = kBestStep);
// improvement(T = d) from the totals alone (nothing sorted): what sending everything buys.
double improvementOfWhole(Scheme scheme, const MagnitudeProfile& p, double L,
                          double eta = kBestStep);

}  // namespace tern::tuning
