#include <doctest/doctest.h>

#include <cmath>

#include "common/compression/compressors.hpp"
#include "test_support.hpp"

using namespace tern::compression;
using namespace tern::compression::testing;

namespace {

// Mean of n independent draws of C(g). Each coordinate's draw has mean g_j and a variance
// var_j known in closed form; the sample mean then has standard error sqrt(var_j / n).
std::vector<double> meanOfDraws(Compressor& c, const std::vector<float>& g, uint32_t level, int n,
                                uint64_t seed, double* mean_count = nullptr) {
  tern::Rng rng(seed);
  std::vector<double> sum(g.size(), 0.0);
  double count = 0.0;
  for (int i = 0; i < n; ++i) {
    const Compressed out = c.compress(g, level, rng);
    const auto dense = toDense(out.decoded);
    for (size_t j = 0; j < g.size(); ++j) sum[j] += dense[j];
    count += double(out.decoded.nonZeros());
  }
  for (double& s : sum) s /= n;
  if (mean_count) *mean_count = count / n;
  return sum;
}

// Two checks on z_j = (mean_j - g_j) / se_j, which is close to N(0, 1) by the central limit
// theorem: every |z_j| <= 5.5 (for d = 60 coordinates a false alarm has probability below
// 60 * 4e-8), and sum z_j^2, a chi-square with d degrees of freedom (mean d, sd sqrt(2d)), is
// below d + 6 sqrt(2d). A biased estimator with bias b_j shifts z_j by b_j / se_j, which grows
// as sqrt(n). Coordinates whose variance is zero must match exactly (up to float rounding).
void checkUnbiased(const std::vector<float>& g, const std::vector<double>& mean,
                   const std::vector<double>& var, int n) {
  double chi2 = 0.0;
  size_t dof = 0;
  for (size_t j = 0; j < g.size(); ++j) {
    CAPTURE(j);
    if (var[j] <= 0.0) {
      CHECK(mean[j] == doctest::Approx(g[j]).epsilon(1e-6));
      continue;
    }
    const double z = (mean[j] - g[j]) / std::sqrt(var[j] / n);
    CHECK(std::fabs(z) <= 5.5);
    chi2 += z * z;
    ++dof;
  }
  if (dof > 0) CHECK(chi2 <= double(dof) + 6.0 * std::sqrt(2.0 * double(dof)));
}

}  // namespace

TEST_CASE("random-k is unbiased: the mean of many draws is within statistical tolerance of g") {
  const size_t d = 60;
  const uint32_t k = 12;
  const int n = 20000;
  const auto g = gaussianGradient(d, 5);
  RandomKCompressor c;
  double mean_count = 0.0;
  const auto mean = meanOfDraws(c, g, k, n, 77, &mean_count);
  // X_j = g_j d/k with probability k/d, else 0: Var = g_j^2 (d/k - 1).
  std::vector<double> var(d);
  for (size_t j = 0; j < d; ++j) var[j] = double(g[j]) * g[j] * (double(d) / k - 1.0);
  checkUnbiased(g, mean, var, n);
  CHECK(mean_count == doctest::Approx(k));
}

TEST_CASE("random-k sends k distinct coordinates, the same ones for the same seed") {
  RandomKCompressor c;
  const auto g = gaussianGradient(1000, 1);
  tern::Rng a(42), b(42);
  const Compressed x = c.compress(g, 100, a);
  const Compressed y = c.compress(g, 100, b);
  CHECK(x.bytes == y.bytes);
  CHECK(x.decoded.indices.size() == 100);
  CHECK(wellFormed(x.decoded));
}

TEST_CASE("stochastic sparsification chooses lambda with sum min(1, lambda |g_j|) = T") {
  StochasticCompressor c;
  for (uint64_t seed : {1, 2, 3}) {
    auto g = gaussianGradient(500, seed);
    g[7] = 40.0f;  // a few coordinates large enough to saturate
    g[300] = -25.0f;
    g[10] = 0.0f;
    for (uint32_t t : {1, 5, 50, 250, 498}) {
      const double lambda = c.solveLambda(g, t);
      double sum = 0.0;
      for (float x : g) sum += std::min(1.0, lambda * std::fabs(double(x)));
      CHECK(sum == doctest::Approx(double(t)).epsilon(1e-9));
    }
    CHECK(std::isinf(c.solveLambda(g, 499)));  // T >= non-zeros: everything with p = 1
  }
}

TEST_CASE("stochastic sparsification keeps its expected count when one magnitude dwarfs the rest") {
  // 1e30 next to magnitudes of about one: in double the plain total has no trace of the small
  // ones, and lambda taken from (total - 1e30) came out infinite, sending all d coordinates.
  StochasticCompressor c;
  auto g = gaussianGradient(1000, 4);
  g[3] = 1e30f;
  g[600] = -3e29f;
  for (uint32_t t : {2u, 3u, 10u, 100u}) {
    CAPTURE(t);
    const double lambda = c.solveLambda(g, t);
    REQUIRE(std::isfinite(lambda));
    double sum = 0.0;
    for (float x : g) sum += std::min(1.0, lambda * std::fabs(double(x)));
    CHECK(sum == doctest::Approx(double(t)).epsilon(1e-9));
    tern::Rng rng(t);
    const Compressed out = c.compress(g, t, rng);
    // Two saturate; the rest is a sum of independent Bernoullis with mean t - 2 <= 98.
    CHECK(out.decoded.indices.size() <= t + 5.0 * std::sqrt(double(t)) + 5.0);
  }
}

TEST_CASE("stochastic sparsification is unbiased and sends T coordinates on average") {
  const size_t d = 60;
  const uint32_t t = 10;
  const int n = 20000;
  auto g = gaussianGradient(d, 9);
  g[4] = 30.0f;  // saturates: sent every time, with zero variance
  StochasticCompressor c;
  const double lambda = c.solveLambda(g, t);
  double mean_count = 0.0;
  const auto mean = meanOfDraws(c, g, t, n, 99, &mean_count);
  // X_j = g_j / p_j with probability p_j: Var = g_j^2 (1 / p_j - 1).
  std::vector<double> var(d);
  for (size_t j = 0; j < d; ++j) {
    const double p = std::min(1.0, lambda * std::fabs(double(g[j])));
    var[j] = p > 0.0 ? double(g[j]) * g[j] * (1.0 / p - 1.0) : 0.0;
  }
  checkUnbiased(g, mean, var, n);
  // The count is a sum of independent Bernoullis: Var(count) <= T, so the mean of n counts is
  // within 5 sqrt(T / n) of T.
  CHECK(std::fabs(mean_count - t) <= 5.0 * std::sqrt(double(t) / n));
}

TEST_CASE("QSGD is unbiased: the mean of many draws is within statistical tolerance of g") {
  const size_t d = 60;
  const int n = 20000;
  const auto g = gaussianGradient(d, 13);
  for (uint32_t s : {1u, 4u, 255u}) {
    CAPTURE(s);
    QsgdCompressor c(s);
    const auto mean = meanOfDraws(c, g, 0, n, s, nullptr);
    double norm2 = 0.0;
    for (float x : g) norm2 += double(x) * x;
    const double norm = double(float(std::sqrt(norm2)));
    // X_j = (norm / s) sign(g_j) l_j, l_j = floor(r) + Bernoulli(frac(r)), r = s |g_j| / norm:
    // Var = (norm / s)^2 frac (1 - frac).
    std::vector<double> var(d);
    for (size_t j = 0; j < d; ++j) {
      const double r = std::fabs(double(g[j])) * s / norm;
      const double f = r - std::floor(r);
      var[j] = (norm / s) * (norm / s) * f * (1.0 - f);
    }
    checkUnbiased(g, mean, var, n);
  }
}

TEST_CASE("QSGD values are the norm times a level over s, bracketing |g_j|") {
  const auto g = gaussianGradient(1000, 4);
  QsgdCompressor c(8);
  tern::Rng rng(1);
  const Compressed out = c.compress(g, 0, rng);
  double norm2 = 0.0;
  for (float x : g) norm2 += double(x) * x;
  const double norm = double(float(std::sqrt(norm2)));
  for (size_t j = 0; j < g.size(); ++j) {
    const double r = std::fabs(double(g[j])) * 8 / norm;
    const double level = std::fabs(double(out.decoded.values[j])) * 8 / norm;
    CHECK(std::fabs(level - std::round(level)) < 1e-4);
    CHECK(std::round(level) >= std::floor(r));
    CHECK(std::round(level) <= std::ceil(r));
  }
}
