#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

double StochasticCompressor::solveLambda(std::span<const float> g, uint32_t expected) {
  // sum_j min(1, lambda a_j) = T with a = |g|. With the m largest saturated,
  // lambda_m = (T - m) / (sum of the rest); the answer is the first m (in decreasing |g| order)
  // whose next magnitude stays unsaturated, lambda_m a_[m] < 1. Fewer than T coordinates are
  // ever saturated, so only the top T magnitudes need sorting.
  double total = 0.0;
  size_t nonzero = 0;
  {
    double part[4] = {0, 0, 0, 0};
    size_t nz[4] = {0, 0, 0, 0};
    size_t j = 0;
    for (; j + 4 <= g.size(); j += 4) {
      for (size_t u = 0; u < 4; ++u) {
        const double a = std::fabs(double(g[j + u]));
        part[u] += a;
        nz[u] += a != 0.0;
      }
    }
    for (; j < g.size(); ++j) {
      const double a = std::fabs(double(g[j]));
      part[0] += a;
      nz[0] += a != 0.0;
    }
    total = (part[0] + part[1]) + (part[2] + part[3]);
    nonzero = nz[0] + nz[1] + nz[2] + nz[3];
  }
  if (expected >= nonzero) return std::numeric_limits<double>::infinity();

  selector_.select(g, expected, top_, top_values_);
  std::vector<double> mags(top_.size());
  for (size_t i = 0; i < top_.size(); ++i) mags[i] = std::fabs(double(top_values_[i]));
  std::sort(mags.begin(), mags.end(), std::greater<double>());
  double rest = total;
  for (uint32_t m = 0; m < expected; ++m) {
    const double lambda = double(expected - m) / rest;
    if (lambda * mags[m] < 1.0 || m + 1 == expected) return lambda;
    rest -= mags[m];
  }
  return double(expected) / total;  // unreachable: the loop returns at m = T - 1
}

Compressed StochasticCompressor::compress(std::span<const float> g, uint32_t level, Rng& rng) {
  const uint32_t d = detail::checkedDim(g, "stochastic");
  for (float x : g) detail::requireFinite(x, "stochastic");
  const double lambda = solveLambda(g, detail::clampLevel(level, d));
  detail::CoinStream coins(rng);
  std::vector<uint32_t> idx;
  std::vector<float> values;
  idx.reserve(size_t(level < d ? level : d) + 64);
  values.reserve(idx.capacity());
  for (uint32_t j = 0; j < d; ++j) {
    const double a = std::fabs(double(g[j]));
    if (a == 0.0) continue;
    const double p = lambda * a;
    if (p >= 1.0) {
      idx.push_back(j);
      values.push_back(g[j]);
    } else if (coins.uniform() < p) {
      idx.push_back(j);
      values.push_back(float(double(g[j]) / p));
    }
  }
  for (float v : values) detail::requireFinite(v, "stochastic");
  Compressed c;
  c.bytes = wire::encodeFp32(wire::Scheme::kStochastic, d, idx, values);
  c.decoded = wire::canonicalGradient(d, std::move(idx), std::move(values));
  return c;
}

size_t StochasticCompressor::encodedBytes(uint32_t dim, uint32_t level) const {
  return detail::sparseBytesBound(wire::Scheme::kStochastic, dim, detail::clampLevel(level, dim));
}

}  // namespace tern::compression
