#include "server/aggregator.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "common/util/checksum.hpp"

namespace tern::server {

Aggregator::Aggregator(const ml::OptimizerSpec& optimizer, std::vector<float> initial,
                       size_t max_message_bytes)
    : max_message_bytes_(max_message_bytes),
      params_(std::move(initial)),
      optimizer_(optimizer, params_.size()) {}

void Aggregator::restore(std::vector<float> params, std::vector<float> velocity) {
  params_ = std::move(params);
  model_checksum_.reset();
  optimizer_.setVelocity(std::move(velocity));
}

compression::DecodeResult Aggregator::decode(std::span<const uint8_t> payload) const {
  compression::DecodeLimits limits;
  limits.expected_dim = uint32_t(params_.size());
  limits.max_dim = uint32_t(params_.size());
  limits.max_bytes = max_message_bytes_;
  return compression::decode(payload, limits);
}

uint64_t Aggregator::modelChecksum() {
  if (!model_checksum_) model_checksum_ = checksum(params_);
  return *model_checksum_;
}

uint64_t Aggregator::largestFrameBytes() {
  if (largest_frame_bytes_ == 0) {
    compression::SparseGradient dense;
    dense.dim = uint32_t(params_.size());
    dense.values.assign(params_.size(), 1.0f);
    largest_frame_bytes_ =
        std::max<uint64_t>(params_.size() * sizeof(float), compression::encodeUpdate(dense).size());
  }
  return largest_frame_bytes_;
}

std::vector<float> Aggregator::deltaOf(const std::vector<float>& aggregate, uint64_t round,
                                       bool& refused) {
  // A step of huge finite pushes can overflow: not taken, the model and momentum kept.
  std::vector<float> delta(params_.size(), 0.0f);
  std::vector<float> velocity_before = optimizer_.velocity();
  optimizer_.step(aggregate, round, delta);
  bool finite_step = true;
  for (size_t j = 0; j < delta.size() && finite_step; ++j)
    finite_step = std::isfinite(delta[j]) && std::isfinite(params_[j] + delta[j]);
  refused = !finite_step;
  if (refused) {
    spdlog::warn("round {}: the aggregated step overflows the model; not taken", round);
    optimizer_.setVelocity(std::move(velocity_before));
    std::fill(delta.begin(), delta.end(), 0.0f);
  }
  return delta;
}

namespace {

// The update as sparse coordinates when fewer than half are non-zero, else dense.
compression::SparseGradient updateOf(const std::vector<float>& delta) {
  compression::SparseGradient update;
  update.dim = uint32_t(delta.size());
  size_t nnz = 0;
  for (float d : delta) nnz += d != 0.0f ? 1 : 0;
  if (nnz * 2 >= delta.size()) {
    update.values = delta;
    return update;
  }
  for (uint32_t j = 0; j < delta.size(); ++j) {
    if (delta[j] != 0.0f) {
      update.indices.push_back(j);
      update.values.push_back(delta[j]);
    }
  }
  return update;
}

}  // namespace

StepResult Aggregator::step(Membership& members, uint64_t round) {
  // In worker-id order, weighted by samples over the workers that pushed (renormalised).
  StepResult r;
  double total_samples = 0.0, loss = 0.0;
  for (auto& [id, w] : members.all()) {
    if (!w.pending) continue;
    total_samples += double(w.samples);
    loss += double(w.samples) * w.loss;
    ++r.participants;
  }
  std::vector<float> aggregate(params_.size(), 0.0f);
  for (auto& [id, w] : members.all()) {
    if (!w.pending) continue;
    compression::addScaled(*w.pending, float(double(w.samples) / total_samples), aggregate);
    w.pending.reset();
  }
  const std::vector<float> delta = deltaOf(aggregate, round, r.refused);
  // A worker may re-join one round behind: the previous model's checksum tells it.
  previous_checksum_ = modelChecksum();
  for (size_t j = 0; j < params_.size(); ++j) params_[j] += delta[j];
  model_checksum_.reset();
  last_update_ = compression::encodeUpdate(updateOf(delta));
  r.train_loss = total_samples > 0 ? loss / total_samples : 0.0;
  return r;
}

}  // namespace tern::server
