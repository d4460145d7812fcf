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
  // ever saturated, so only the top T magnitudes can matter, and usually none saturates.
  double part[4] = {0, 0, 0, 0};
  size_t nz[4] = {0, 0, 0, 0};
  float top[4] = {0, 0, 0, 0};
  size_t j = 0;
  for (; j + 4 <= g.size(); j += 4) {
    for (size_t u = 0; u < 4; ++u) {
      const float a = std::fabs(g[j + u]);
      part[u] += double(a);
      nz[u] += a != 0.0f;
      top[u] = std::max(top[u], a);
    }
  }
  for (; j < g.size(); ++j) {
    const float a = std::fabs(g[j]);
    part[0] += double(a);
    nz[0] += a != 0.0f;
    top[0] = std::max(top[0], a);
  }
  const double total = (part[0] + part[1]) + (part[2] + part[3]);
  const size_t nonzero = nz[0] + nz[1] + nz[2] + nz[3];
  const double largest = double(std::max(std::max(top[0], top[1]), std::max(top[2], top[3])));
  if (expected >= nonzero) return std::numeric_limits<double>::infinity();
  if (double(expected) / total * largest < 1.0) return double(expected) / total;  // m = 0

  selector_.select(g, expected, top_, top_values_);
  std::vector<double> mags(top_.size());
  for (size_t i = 0; i < top_.size(); ++i) mags[i] = std::fabs(double(top_values_[i]));
  std::sort(mags.begin(), mags.end(), std::greater<double>());
  // The sum of the magnitudes below the m largest, built up from the small end: subtracting
  // the largest from the total would cancel catastrophically when one magnitude dwarfs the
  // rest (1e30 against ones: the total has no trace of them left).
  const double kth = mags.back();
  double below = 0.0;
  size_t ties = 0;
  for (float x : g) {
    const double a = std::fabs(double(x));
    if (a < kth) below += a;
    ties += a == kth;
  }
  const size_t ties_kept = size_t(std::count(mags.begin(), mags.end(), kth));
  std::vector<double> rest(mags.size() + 1);
  rest[mags.size()] = below + double(ties - ties_kept) * kth;
  for (size_t m = mags.size(); m-- > 0;) rest[m] = rest[m + 1] + mags[m];
  for (uint32_t m = 0; m < expected; ++m) {
    const double lambda = double(expected - m) / rest[m];
    if (lambda * mags[m] < 1.0 || m + 1 == expected) return lambda;
  }
  return double(expected) / total;  // unreachable: the loop returns at m = T - 1
}

Compressed StochasticCompressor::compress(std::span<const float> g, uint32_t level, Rng& rng) {
  const uint32_t d = detail::checkedDim(g, "stochastic");
  detail::requireAllFinite(g, "stochastic");
  const double lambda = solveLambda(g, detail::clampLevel(level, d));
  // An unsaturated coordinate sends g_j / p_j = sign(g_j) / lambda.
  const float magnitude = float(1.0 / lambda);
  detail::requireFinite(magnitude, "stochastic");
  // Branch-free, block by block: one coin per coordinate from a small buffer, and kept
  // coordinates appended by advancing n (room for a whole block is made first).
  constexpr uint32_t kBlock = 4096;
  double coins[kBlock];
  detail::CoinStream coin_stream(rng);
  std::vector<uint32_t> idx;
  std::vector<float> values;
  size_t n = 0;
  for (uint32_t base = 0; base < d; base += kBlock) {
    const uint32_t len = std::min(kBlock, d - base);
    coin_stream.fill(std::span(coins, len));
    if (idx.size() < n + len) {
      idx.resize(std::max(2 * idx.size(), n + len));
      values.resize(idx.size());
    }
    uint32_t* oi = idx.data();
    float* ov = values.data();
    for (uint32_t i = 0; i < len; ++i) {
      const float x = g[base + i];
      const double p = lambda * std::fabs(double(x));
      const bool saturated = p >= 1.0;
      const bool keep = (x != 0.0f) & (saturated | (coins[i] < p));
      oi[n] = base + i;
      ov[n] = saturated ? x : std::copysign(magnitude, x);
      n += keep;
    }
  }
  idx.resize(n);
  values.resize(n);
  Compressed c;
  c.bytes = wire::encodeFp32(wire::Scheme::kStochastic, d, idx, values);
  c.decoded = wire::canonicalGradient(d, std::move(idx), std::move(values));
  return c;
}

size_t StochasticCompressor::encodedBytes(uint32_t dim, uint32_t level) const {
  return detail::sparseBytesBound(wire::Scheme::kStochastic, dim, detail::clampLevel(level, dim));
}

}  // namespace tern::compression
