#include "common/ml/optimizer.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace tern::ml {

SgdOptimizer::SgdOptimizer(const OptimizerSpec& spec, size_t params)
    : spec_(spec), velocity_(params, 0.0f) {
  if (!std::isfinite(spec.lr) || !std::isfinite(spec.momentum) || !std::isfinite(spec.decay) ||
      spec.momentum < 0 || spec.decay <= 0) {
    throw std::invalid_argument("SgdOptimizer: lr, momentum >= 0 and decay > 0 must be finite");
  }
}

double SgdOptimizer::learningRate(uint64_t round) const {
  if (spec_.decay_every == 0) return spec_.lr;
  return spec_.lr * std::pow(spec_.decay, double(round / spec_.decay_every));
}

void SgdOptimizer::step(std::span<const float> gradient, uint64_t round, std::span<float> delta) {
  stepFrom(velocity_, gradient, round, delta);
}

void SgdOptimizer::stepFrom(std::span<const float> previous, std::span<const float> gradient,
                            uint64_t round, std::span<float> delta) {
  if (gradient.size() != velocity_.size() || delta.size() != velocity_.size() ||
      previous.size() != velocity_.size()) {
    throw std::invalid_argument("SgdOptimizer::step: expected " + std::to_string(velocity_.size()) +
                                " parameters, got gradient " + std::to_string(gradient.size()) +
                                ", previous velocity " + std::to_string(previous.size()) +
                                " and delta " + std::to_string(delta.size()));
  }
  // All arithmetic in fp32 with the scalars rounded once, so every replica that applies the
  // same delta computes exactly the same bits.
  const auto momentum = static_cast<float>(spec_.momentum);
  const auto neg_lr = static_cast<float>(-learningRate(round));
  for (size_t j = 0; j < velocity_.size(); ++j) {
    velocity_[j] = momentum * previous[j] + gradient[j];
    delta[j] = neg_lr * velocity_[j];
  }
}

}  // namespace tern::ml
