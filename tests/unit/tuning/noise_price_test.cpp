#include "common/tuning/noise_price.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/tuning/improvement.hpp"
#include "common/tuning/magnitude_profile.hpp"
#include "random_vectors.hpp"

using namespace tern;
using namespace tern::tuning;
using namespace tern::tuning::testing;

TEST_CASE("noise priced at L everywhere is L ||v||^2 (1/omega - 1), omega from the profile") {
  Rng rng(71);
  const size_t d = 400;
  const double L = 1.7;
  for (const Shape shape : allShapes()) {
    CAPTURE(shapeName(shape));
    const std::vector<float> v = randomVector(d, shape, rng);
    const MagnitudeProfile p(v, d);
    NoisePrice price(std::vector<double>(d, L));
    price.prepare(v);
    for (const uint32_t T : {1u, 3u, 17u, 100u, 399u}) {
      CAPTURE(T);
      const double omega = stochasticOmega(p, T);
      const double raw = p.totalL2sq() * (1.0 / omega - 1.0);
      const NoisePrice::Noise n = price.at(T);
      CHECK(n.raw == doctest::Approx(raw).epsilon(1e-9).scale(p.totalL2sq()));
      CHECK(n.priced == doctest::Approx(L * raw).epsilon(1e-9).scale(L * p.totalL2sq()));
    }
    // Everything non-zero is sent exactly from T = nonZeros() on.
    CHECK(price.at(static_cast<uint32_t>(p.nonZeros())).raw == 0.0);
    CHECK(price.at(static_cast<uint32_t>(d)).priced == 0.0);
  }
}

TEST_CASE("the priced noise is the mean weighted squared error of the compressor's own draws") {
  // Monte Carlo over the stochastic compressor: sum_j w_j (Q_j - v_j)^2 averaged over draws,
  // against the closed form, within four standard errors of the sample mean.
  Rng rng(73);
  const size_t d = 120;
  std::uniform_real_distribution<double> unif(0.0, 2.0);
  compression::CompressorSpec spec;
  spec.name = "stochastic";
  const auto comp = compression::makeCompressor(spec);
  for (const Shape shape : {Shape::kGaussian, Shape::kHeavyTailed}) {
    const std::vector<float> v = randomVector(d, shape, rng);
    std::vector<double> w(d);
    for (double& x : w) x = unif(rng);
    NoisePrice price(w);
    price.prepare(v);
    for (const uint32_t T : {4u, 30u}) {
      CAPTURE(shapeName(shape));
      CAPTURE(T);
      const int draws = 20000;
      double sum = 0.0, sum_sq = 0.0, raw_sum = 0.0;
      for (int k = 0; k < draws; ++k) {
        const std::vector<float> q = compression::toDense(comp->compress(v, T, rng).decoded);
        double e = 0.0, r = 0.0;
        for (size_t j = 0; j < d; ++j) {
          const double diff = static_cast<double>(q[j]) - v[j];
          e += w[j] * diff * diff;
          r += diff * diff;
        }
        sum += e;
        sum_sq += e * e;
        raw_sum += r;
      }
      const double mean = sum / draws;
      const double se = std::sqrt((sum_sq / draws - mean * mean) / draws);
      const NoisePrice::Noise n = price.at(T);
      MESSAGE("T " << T << ": priced " << n.priced << ", sampled " << mean << " +- " << se);
      CHECK(std::fabs(mean - n.priced) <= 4.0 * se);
      CHECK(raw_sum / draws == doctest::Approx(n.raw).epsilon(0.05));
    }
  }
}

TEST_CASE("noise price rejects bad weights, lengths and entries") {
  CHECK_THROWS_AS(NoisePrice(std::vector<double>{1.0, -1.0}), std::invalid_argument);
  CHECK_THROWS_AS(NoisePrice(std::vector<double>{NAN}), std::invalid_argument);
  NoisePrice price(std::vector<double>(3, 1.0));
  const std::vector<float> two = {1.0f, 2.0f};
  CHECK_THROWS_AS(price.prepare(two), std::invalid_argument);
  const std::vector<float> bad = {1.0f, INFINITY, 2.0f};
  CHECK_THROWS_AS(price.prepare(bad), std::invalid_argument);
  const std::vector<float> ok = {1.0f, 0.0f, 2.0f};
  price.prepare(ok);
  CHECK_THROWS_AS(price.at(0), std::invalid_argument);
}
