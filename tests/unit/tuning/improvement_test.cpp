#include "common/tuning/improvement.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/tuning/magnitude_profile.hpp"
#include "random_vectors.hpp"

using namespace tern;
using namespace tern::tuning;
using tern::tuning::testing::allShapes;
using tern::tuning::testing::randomVector;
using tern::tuning::testing::Shape;

namespace {

// f(x) = 1/2 sum_j a_j x_j^2: L-smooth with L = max a_j, gradient a .* x.
struct Quadratic {
  std::vector<double> a;
  double value(const std::vector<double>& x) const {
    double f = 0.0;
    for (size_t j = 0; j < x.size(); ++j) f += 0.5 * a[j] * x[j] * x[j];
    return f;
  }
  std::vector<float> gradient(const std::vector<double>& x) const {
    std::vector<float> g(x.size());
    for (size_t j = 0; j < x.size(); ++j) g[j] = static_cast<float>(a[j] * x[j]);
    return g;
  }
};

// x_new = x - step * Q with Q dense; the descent f(x) - f(x_new).
double decrease(const Quadratic& f, const std::vector<double>& x, const std::vector<float>& q,
                double step) {
  std::vector<double> y = x;
  for (size_t j = 0; j < x.size(); ++j) y[j] -= step * q[j];
  return f.value(x) - f.value(y);
}

// x chosen so that the gradient a .* x is exactly representable in float.
std::vector<double> pointWithGradient(const Quadratic& f, const std::vector<float>& g) {
  std::vector<double> x(g.size());
  for (size_t j = 0; j < g.size(); ++j) x[j] = g[j] / f.a[j];
  return x;
}

compression::SparseGradient compressWith(const std::string& name, const std::vector<float>& g,
                                         uint32_t T, Rng& rng) {
  compression::CompressorSpec spec;
  spec.name = name;
  return compression::makeCompressor(spec)->compress(g, T, rng).decoded;
}

// The stochastic compressor's mean decrease at step eta over many draws (at x, gradient g) is
// `predicted`, within five standard errors.
void checkStochasticDecrease(const Quadratic& f, const std::vector<double>& x,
                             const std::vector<float>& g, uint32_t T, double eta, double predicted,
                             Rng& rng) {
  compression::CompressorSpec spec;
  spec.name = "stochastic";
  auto comp = compression::makeCompressor(spec);
  const int draws = 20000;
  double sum = 0.0, sum2 = 0.0;
  for (int i = 0; i < draws; ++i) {
    const auto q = compression::toDense(comp->compress(g, T, rng).decoded);
    const double dec = decrease(f, x, q, eta);
    sum += dec;
    sum2 += dec * dec;
  }
  const double mean = sum / draws;
  const double stderr_ = std::sqrt((sum2 / draws - mean * mean) / draws);
  CHECK(std::fabs(mean - predicted) < 5 * stderr_ + 1e-9 * std::fabs(predicted));
}

// p_j = min(1, lambda |g_j|) with sum p_j = T, solved by bisection on lambda from scratch.
std::vector<double> keepProbabilities(const std::vector<float>& g, double T) {
  auto expected = [&](double lambda) {
    double s = 0.0;
    for (float x : g) s += std::min(1.0, lambda * std::fabs(static_cast<double>(x)));
    return s;
  };
  double lo = 0.0, hi = 1.0;
  while (expected(hi) < T) hi *= 2.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (expected(mid) < T ? lo : hi) = mid;
  }
  std::vector<double> p(g.size());
  for (size_t j = 0; j < g.size(); ++j) p[j] = std::min(1.0, hi * std::fabs(double(g[j])));
  return p;
}

double directOmega(const std::vector<float>& g, double T) {
  const std::vector<double> p = keepProbabilities(g, T);
  double norm2 = 0.0, second = 0.0;
  for (size_t j = 0; j < g.size(); ++j) {
    const double x = g[j];
    norm2 += x * x;
    if (x != 0.0) second += x * x / p[j];
  }
  return norm2 / second;
}

}  // namespace

TEST_CASE(
    "top-T improvement is the exact decrease on an isotropic quadratic and a lower bound "
    "on any quadratic with the same smoothness") {
  Rng rng(3);
  const size_t d = 200;
  const double L = 2.5;
  for (const auto shape : {Shape::kGaussian, Shape::kHeavyTailed}) {
    const std::vector<float> g = randomVector(d, shape, rng);
    Quadratic iso{std::vector<double>(d, L)};
    Quadratic aniso{std::vector<double>(d)};
    for (auto& a : aniso.a) a = std::uniform_real_distribution<double>(0.01, L)(rng);
    aniso.a[17] = L;
    const MagnitudeProfile p(g, d);
    for (const uint32_t T : {1u, 5u, 50u, 199u, 200u}) {
      const auto q = compression::toDense(compressWith("topk", g, T, rng));
      const double predicted = topTImprovement(p, T, L);
      CHECK(decrease(iso, pointWithGradient(iso, g), q, topTStep(L)) ==
            doctest::Approx(predicted).epsilon(1e-9));
      CHECK(decrease(aniso, pointWithGradient(aniso, g), q, topTStep(L)) >=
            predicted * (1 - 1e-12));
    }
  }
}

TEST_CASE(
    "S+Q improvement with its step is the exact decrease on an isotropic quadratic, for "
    "the sq compressor's own scale and for any other scale") {
  Rng rng(5);
  const size_t d = 300;
  const double L = 0.7;
  Quadratic iso{std::vector<double>(d, L)};
  for (const auto shape : {Shape::kGaussian, Shape::kHeavyTailed, Shape::kTies}) {
    const std::vector<float> g = randomVector(d, shape, rng);
    const auto x = pointWithGradient(iso, g);
    const MagnitudeProfile p(g, d);
    for (const uint32_t T : {1u, 3u, 30u, 299u, 300u}) {
      const double predicted = signScaleImprovement(p, T, L);
      // What the sq compressor really sends, stepped as the tuner prescribes.
      const auto q = compression::toDense(compressWith("sq", g, T, rng));
      CHECK(decrease(iso, x, q, step(Scheme::kSignScale, p, T, L)) ==
            doctest::Approx(predicted).epsilon(1e-6));
      // Any scale s, with the step S1 / (L T s): the same decrease, and no step does better.
      const double s = 3.25;
      std::vector<float> q_s(d, 0.0f);
      std::vector<size_t> order(d);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
      for (size_t i = 0; i < T; ++i) q_s[order[i]] = static_cast<float>(g[order[i]] < 0 ? -s : s);
      const double best = signScaleStep(p, T, L, s);
      CHECK(decrease(iso, x, q_s, best) == doctest::Approx(predicted).epsilon(1e-9));
      CHECK(decrease(iso, x, q_s, best * 1.1) < predicted);
      CHECK(decrease(iso, x, q_s, best * 0.9) < predicted);
    }
  }
}

TEST_CASE(
    "S+Q improvement with its step stays the exact decrease when T passes the vector's "
    "non-zeros") {
  // The sq compressor sends no sign for an exact zero: at T beyond the ten non-zeros it sends
  // those ten, scaled by S1 / 10, and the decrease is that of T = 10.
  Rng rng(21);
  const size_t d = 100;
  const double L = 1.3;
  Quadratic iso{std::vector<double>(d, L)};
  std::vector<float> g(d, 0.0f);
  for (size_t j = 0; j < d; j += 10) g[j] = std::uniform_real_distribution<float>(-2, 2)(rng);
  const auto x = pointWithGradient(iso, g);
  const MagnitudeProfile p(g, d);
  REQUIRE(p.nonZeros() == 10);
  const auto q10 = compression::toDense(compressWith("sq", g, 10, rng));
  const double at_ten = decrease(iso, x, q10, step(Scheme::kSignScale, p, 10, L));
  for (const uint32_t T : {5u, 10u, 11u, 50u, 100u}) {
    CAPTURE(T);
    const auto q = compression::toDense(compressWith("sq", g, T, rng));
    const double exact = decrease(iso, x, q, step(Scheme::kSignScale, p, T, L));
    CHECK(signScaleImprovement(p, T, L) == doctest::Approx(exact).epsilon(1e-6));
    if (T >= 10) CHECK(exact == doctest::Approx(at_ten).epsilon(1e-9));
  }
  CHECK(improvementOfWhole(Scheme::kSignScale, p, L) == doctest::Approx(at_ten).epsilon(1e-6));
}

TEST_CASE(
    "stochastic omega equals the one from probabilities solved directly, with or without "
    "sorting") {
  Rng rng(9);
  for (const auto shape : allShapes()) {
    const std::vector<float> g = randomVector(500, shape, rng);
    const MagnitudeProfile p(g, g.size());
    for (const uint32_t T : {1u, 2u, 10u, 40u, 120u, 499u}) {
      CAPTURE(T);
      CAPTURE(testing::shapeName(shape));
      const double omega = stochasticOmega(p, T);
      if (T >= p.nonZeros()) {
        CHECK(omega == 1.0);
        continue;
      }
      CHECK(omega == doctest::Approx(directOmega(g, T)).epsilon(1e-9));
      CHECK(stochasticOmegaUnsorted(g, T) == doctest::Approx(omega).epsilon(1e-9));
      CHECK(omega > 0.0);
      CHECK(omega <= 1.0);
    }
  }
}

TEST_CASE(
    "stochastic improvement is the expected decrease on an isotropic quadratic and omega "
    "grows with T up to one") {
  Rng rng(13);
  const size_t d = 400;
  const double L = 1.5;
  const std::vector<float> g = randomVector(d, Shape::kHeavyTailed, rng);
  Quadratic iso{std::vector<double>(d, L)};
  const auto x = pointWithGradient(iso, g);
  const MagnitudeProfile p(g, d);
  double previous = 0.0;
  for (uint32_t T = 1; T <= d; ++T) {
    const double omega = stochasticOmega(p, T);
    CHECK(omega >= previous * (1 - 1e-12));
    previous = omega;
    if (T % 37 != 1) continue;
    // E f(x - gamma Q) = f(x) - gamma ||g||^2 + L gamma^2 / 2 * sum g_j^2 / p_j, in closed form.
    const std::vector<double> prob = keepProbabilities(g, T);
    double norm2 = 0.0, second = 0.0;
    for (size_t j = 0; j < d; ++j) {
      norm2 += double(g[j]) * g[j];
      second += double(g[j]) * g[j] / prob[j];
    }
    const double gamma = stochasticStep(p, T, L);
    const double expected_decrease = gamma * norm2 - L * gamma * gamma / 2 * second;
    CHECK(expected_decrease == doctest::Approx(stochasticImprovement(p, T, L)).epsilon(1e-8));
  }
  CHECK(previous == 1.0);
  (void)x;
}

TEST_CASE("the stochastic compressor's average decrease matches the predicted expectation") {
  Rng rng(17);
  const size_t d = 100;
  const double L = 1.0;
  const std::vector<float> g = randomVector(d, Shape::kHeavyTailed, rng);
  Quadratic iso{std::vector<double>(d, L)};
  const auto x = pointWithGradient(iso, g);
  const MagnitudeProfile p(g, d);
  const uint32_t T = 10;
  checkStochasticDecrease(iso, x, g, T, stochasticStep(p, T, L), stochasticImprovement(p, T, L),
                          rng);
}

TEST_CASE("the improvement bound over a range is never below the improvement inside it") {
  Rng rng(19);
  for (const auto shape : allShapes()) {
    const std::vector<float> g = randomVector(300, shape, rng);
    const MagnitudeProfile p(g, g.size());
    // Bounds reaching past a partly sorted prefix rest on the smallest magnitude sorted so far.
    const MagnitudeProfile partial(g, 30);
    for (const Scheme scheme : {Scheme::kTopT, Scheme::kSignScale, Scheme::kStochastic}) {
      for (const auto& [lo, hi] :
           {std::pair<size_t, size_t>{1, 1}, {1, 40}, {17, 90}, {250, 300}, {31, 64}}) {
        const double bound = improvementUpperBound(scheme, p, lo, hi, 2.0);
        const double partial_bound = improvementUpperBound(scheme, partial, lo, hi, 2.0);
        for (size_t T = lo; T <= hi; ++T) {
          CHECK(improvement(scheme, p, T, 2.0) <= bound * (1 + 1e-9));
          CHECK(improvement(scheme, p, T, 2.0) <= partial_bound * (1 + 1e-9));
        }
      }
      CHECK(improvementOfWhole(scheme, partial, 2.0) ==
            doctest::Approx(improvement(scheme, p, 300, 2.0)).epsilon(1e-12));
    }
  }
}

TEST_CASE("the magnitude profile sorts only what it is asked for and keeps exact totals") {
  const std::vector<float> v = {-5, 1, 12, -7, 0, 0, -100, 500, 6, -30};
  const MagnitudeProfile p(v, 3);
  REQUIRE(p.sortedCount() == 3);
  CHECK(p.magnitude(1) == 500);
  CHECK(p.magnitude(2) == 100);
  CHECK(p.magnitude(3) == 30);
  CHECK(p.s1(2) == 600);
  CHECK(p.s2(3) == 250000 + 10000 + 900);
  CHECK(p.totalL1() == 661);
  CHECK(p.totalL2sq() == 261155);
  CHECK(p.nonZeros() == 8);
  CHECK(p.tailL1(3) == 31);
  CHECK(p.tailL1(0) == 661);
}

TEST_CASE("growing the sorted prefix gives bit-identical prefix sums to sorting at once") {
  Rng rng(61);
  for (const auto shape : allShapes()) {
    const std::vector<float> v = randomVector(3000, shape, rng);
    MagnitudeProfile grown(v, 1);
    for (size_t k : {5, 6, 100, 1024, 2999, 3000, 5000}) grown.sortAtLeast(k);
    const MagnitudeProfile once(v, v.size());
    REQUIRE(grown.sortedCount() == v.size());
    for (size_t T = 0; T <= v.size(); ++T) {
      CHECK(grown.s1(T) == once.s1(T));
      CHECK(grown.s2(T) == once.s2(T));
    }
    for (size_t r = 2; r <= v.size(); ++r) CHECK(once.magnitude(r) <= once.magnitude(r - 1));
  }
}

TEST_CASE("compressor names map to their improvement functions") {
  CHECK(schemeOf("topk") == Scheme::kTopT);
  CHECK(schemeOf("randomk") == Scheme::kUniform);
  CHECK(schemeOf("threshold") == Scheme::kTopT);
  CHECK(schemeOf("sq") == Scheme::kSignScale);
  CHECK(schemeOf("stochastic") == Scheme::kStochastic);
  CHECK_FALSE(schemeOf("identity").has_value());
  CHECK_FALSE(schemeOf("qsgd").has_value());
  // The compressor's own kind maps as its name does.
  for (const std::string& name : tern::compression::compressorNames()) {
    const auto compressor = tern::compression::makeCompressor({name, 0.5, 4});
    CHECK(schemeOf(compressor->kind()) == schemeOf(name));
  }
}

TEST_CASE(
    "random-T improvement is the expected decrease over every T-subset on an isotropic "
    "quadratic, at its best step") {
  // Expectation taken exactly: every T-subset S of the d coordinates, each equally likely, with
  // Q = (d/T) g on S, as the randomk compressor sends.
  Rng rng(29);
  const size_t d = 10;
  const double L = 2.5;
  const std::vector<float> g = randomVector(d, Shape::kHeavyTailed, rng);
  Quadratic iso{std::vector<double>(d, L)};
  const auto x = pointWithGradient(iso, g);
  const MagnitudeProfile p(g, 0);  // random-T needs nothing sorted
  for (uint32_t T = 1; T <= d; ++T) {
    CAPTURE(T);
    const double gamma = uniformStep(p, T, L);
    auto expected = [&](double step) {
      double sum = 0.0;
      size_t subsets = 0;
      for (uint32_t mask = 0; mask < (1u << d); ++mask) {
        if (uint32_t(std::popcount(mask)) != T) continue;
        std::vector<float> q(d, 0.0f);
        for (size_t j = 0; j < d; ++j)
          if (mask >> j & 1u) q[j] = float(double(d) / T) * g[j];
        sum += decrease(iso, x, q, step);
        ++subsets;
      }
      return sum / double(subsets);
    };
    const double at_best = expected(gamma);
    CHECK(at_best == doctest::Approx(uniformImprovement(p, T, L)).epsilon(1e-5));
    CHECK(expected(0.8 * gamma) < at_best);
    CHECK(expected(1.25 * gamma) < at_best);
    CHECK(improvement(Scheme::kUniform, p, T, L) == uniformImprovement(p, T, L));
  }
  CHECK(uniformImprovement(p, d, L) == doctest::Approx(improvementOfWhole(Scheme::kUniform, p, L)));
}

TEST_CASE(
    "at the paper's step the improvement at a given step is the paper's: 1/L for top-T and S+Q, "
    "omega(T)/L for stochastic, T/(dL) for random-T") {
  Rng rng(29);
  for (const auto shape : allShapes()) {
    for (const size_t d : {size_t{1}, size_t{7}, size_t{300}}) {
      const std::vector<float> g = randomVector(d, shape, rng);
      const MagnitudeProfile p(g, d);
      const double L = std::uniform_real_distribution<double>(0.1, 10.0)(rng);
      for (uint32_t T = 1; T <= d; ++T) {
        CAPTURE(d);
        CAPTURE(T);
        const double scale = p.totalL2sq() / L;
        for (const Scheme scheme : {Scheme::kTopT, Scheme::kSignScale}) {
          CHECK(std::fabs(improvement(scheme, p, T, L, 1.0 / L) - improvement(scheme, p, T, L)) <=
                1e-12 * scale);
          CHECK(step(scheme, p, T, L, 1.0 / L) == 1.0 / L);
        }
        const double omega = stochasticOmega(p, T);
        CHECK(std::fabs(improvement(Scheme::kStochastic, p, T, L, omega / L) -
                        stochasticImprovement(p, T, L)) <= 1e-12 * scale);
        CHECK(std::fabs(improvement(Scheme::kUniform, p, T, L, double(T) / double(d) / L) -
                        uniformImprovement(p, T, L)) <= 1e-12 * scale);
        // The best step is the best: any other step's bound is no larger.
        for (const double eta : {0.3 / L, 1.5 / L}) {
          CHECK(improvement(Scheme::kTopT, p, T, L, eta) <= topTImprovement(p, T, L) * 1.000001);
          CHECK(improvement(Scheme::kStochastic, p, T, L, eta) <=
                stochasticImprovement(p, T, L) * 1.000001);
        }
      }
    }
  }
}

TEST_CASE(
    "the stochastic improvement at a step is eta ||g||^2 - L eta^2 / 2 sum g_j^2 / p_j with the "
    "keep probabilities solved directly") {
  Rng rng(31);
  for (const auto shape : allShapes()) {
    const std::vector<float> g = randomVector(400, shape, rng);
    const MagnitudeProfile p(g, g.size());
    const double L = 3.0;
    size_t negative = 0, positive = 0;
    for (const uint32_t T : {1u, 5u, 40u, 200u, 399u}) {
      if (T >= p.nonZeros()) continue;
      const std::vector<double> prob = keepProbabilities(g, T);
      double norm2 = 0.0, second = 0.0;
      for (size_t j = 0; j < g.size(); ++j) {
        const double x = g[j];
        norm2 += x * x;
        if (x != 0.0) second += x * x / prob[j];
      }
      for (const double eta : {0.02 / L, 0.3 / L, 1.0 / L, 1.5 / L}) {
        CAPTURE(T);
        CAPTURE(eta);
        const double expected = eta * norm2 - L * eta * eta * second / 2.0;
        const double got = improvement(Scheme::kStochastic, p, T, L, eta);
        CHECK(std::fabs(got - expected) <= 1e-6 * (eta * norm2 + std::fabs(expected)));
        negative += got < 0.0;
        positive += got > 0.0;
      }
    }
    // Small T overshoot where large T earn: the step-aware choice differs from omega/C.
    CHECK(negative > 0);
    CHECK(positive > 0);
  }
}

TEST_CASE("the stochastic compressor's average decrease at a given step matches the bound there") {
  // On f = L/2 ||x||^2 the descent lemma is an equality: f(x) - f(x - eta Q) = eta <g, Q> -
  // L eta^2 ||Q||^2 / 2, whose expectation over the compressor's draws is the bound at eta.
  Rng rng(37);
  const size_t d = 100;
  const double L = 2.0;
  const std::vector<float> g = randomVector(d, Shape::kHeavyTailed, rng);
  Quadratic iso{std::vector<double>(d, L)};
  const auto x = pointWithGradient(iso, g);
  const MagnitudeProfile p(g, d);
  for (const uint32_t T : {3u, 10u, 50u}) {
    for (const double eta : {0.3 / L, 1.0 / L, 1.5 / L}) {
      CAPTURE(T);
      CAPTURE(eta);
      checkStochasticDecrease(iso, x, g, T, eta, improvement(Scheme::kStochastic, p, T, L, eta),
                              rng);
    }
  }
}

TEST_CASE("the improvement bound over a range holds at any step, of either sign") {
  Rng rng(41);
  for (const auto shape : allShapes()) {
    const std::vector<float> g = randomVector(300, shape, rng);
    const MagnitudeProfile full(g, g.size());
    for (const size_t sorted : {size_t{0}, size_t{1}, size_t{40}, size_t{300}}) {
      const MagnitudeProfile p(g, sorted);
      const double L = 1.7;
      for (const double eta : {0.02 / L, 0.3 / L, 1.0 / L, 1.5 / L, 2.5 / L}) {
        for (const Scheme scheme :
             {Scheme::kTopT, Scheme::kSignScale, Scheme::kStochastic, Scheme::kUniform}) {
          for (const auto& [lo, hi] : std::vector<std::pair<size_t, size_t>>{
                   {1, 1}, {1, 64}, {30, 90}, {41, 300}, {200, 299}, {300, 300}}) {
            // Stochastic's bound needs omega at hi, known only inside the prefix or past the
            // non-zeros (or bounded by Cauchy-Schwarz past the prefix).
            const double bound = improvementUpperBound(scheme, p, lo, hi, L, eta);
            for (size_t T = lo; T <= hi; ++T) {
              CAPTURE(sorted);
              CAPTURE(eta);
              CAPTURE(schemeName(scheme));
              CAPTURE(lo);
              CAPTURE(hi);
              CAPTURE(T);
              const double imp = improvement(scheme, full, T, L, eta);
              CHECK(imp <= bound + 1e-9 * std::fabs(bound) + 1e-12 * eta * full.totalL2sq());
            }
          }
        }
      }
    }
  }
}
