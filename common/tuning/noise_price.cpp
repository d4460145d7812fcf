#include "common/tuning/noise_price.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tern::tuning {

NoisePrice::NoisePrice(std::vector<double> weights) : weights_(std::move(weights)) {
  for (double w : weights_)
    if (!(w >= 0.0) || !std::isfinite(w))
      throw std::invalid_argument("NoisePrice: weights must be finite and >= 0");
}

void NoisePrice::prepare(std::span<const float> v) {
  const size_t d = v.size();
  if (d != weights_.size())
    throw std::invalid_argument("NoisePrice: vector and weights differ in length");
  for (float x : v)
    if (!std::isfinite(x)) throw std::invalid_argument("NoisePrice: non-finite entry");
  order_.resize(d);
  for (size_t j = 0; j < d; ++j) order_[j] = static_cast<uint32_t>(j);
  std::sort(order_.begin(), order_.end(), [&](uint32_t x, uint32_t y) {
    const float a = std::fabs(v[x]), b = std::fabs(v[y]);
    return a > b || (a == b && x < y);
  });
  mag_.resize(d);
  nonzeros_ = 0;
  for (size_t r = 0; r < d; ++r) {
    mag_[r] = std::fabs(static_cast<double>(v[order_[r]]));
    nonzeros_ += mag_[r] > 0.0;
  }
  tail_a_.assign(d + 1, 0.0);
  tail_a2_.assign(d + 1, 0.0);
  tail_wa_.assign(d + 1, 0.0);
  tail_wa2_.assign(d + 1, 0.0);
  for (size_t r = d; r-- > 0;) {
    const double a = mag_[r], w = weights_[order_[r]];
    tail_a_[r] = tail_a_[r + 1] + a;
    tail_a2_[r] = tail_a2_[r + 1] + a * a;
    tail_wa_[r] = tail_wa_[r + 1] + w * a;
    tail_wa2_[r] = tail_wa2_[r + 1] + w * a * a;
  }
}

NoisePrice::Noise NoisePrice::at(uint32_t T) const {
  if (T == 0) throw std::invalid_argument("NoisePrice: level must be >= 1");
  if (T >= nonzeros_) return {};
  // The k largest are kept for certain: the smallest k whose next magnitude stays below
  // 1 / lambda_k, lambda_k = (T - k) / (the rest's sum); k = T - 1 always qualifies.
  size_t lo = 0, hi = T - 1;
  while (lo < hi) {
    const size_t k = lo + (hi - lo) / 2;
    if (static_cast<double>(T - k) * mag_[k] < tail_a_[k])
      hi = k;
    else
      lo = k + 1;
  }
  // Unsaturated coordinates: Var = a^2 (1 / (lambda a) - 1) = a / lambda - a^2.
  const double inv_lambda = tail_a_[lo] / static_cast<double>(T - lo);
  return {std::max(0.0, inv_lambda * tail_a_[lo] - tail_a2_[lo]),
          std::max(0.0, inv_lambda * tail_wa_[lo] - tail_wa2_[lo])};
}

}  // namespace tern::tuning
