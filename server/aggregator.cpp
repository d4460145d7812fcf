#include "server/aggregator.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "common/util/checksum.hpp"
#include "common/util/float_passes.hpp"
#include "server/robust_aggregation.hpp"

namespace tern::server {

Aggregator::Aggregator(const ml::OptimizerSpec& optimizer, std::vector<float> initial,
                       size_t max_message_bytes, const config::AggregationSettings& robustness)
    : max_message_bytes_(max_message_bytes),
      robustness_(robustness),
      params_(std::move(initial)),
      optimizer_(optimizer, params_.size()) {}

void Aggregator::restore(std::vector<float> params, std::vector<float> velocity,
                         std::vector<float> download_residual) {
  params_ = std::move(params);
  model_checksum_.reset();
  previous_known_ = false;
  previous_checksum_.reset();
  optimizer_.setVelocity(std::move(velocity));
  download_residual_ = std::move(download_residual);
}

compression::DecodeResult Aggregator::decode(std::span<const uint8_t> payload) {
  compression::DecodeLimits limits;
  limits.expected_dim = uint32_t(params_.size());
  limits.max_dim = uint32_t(params_.size());
  limits.max_bytes = max_message_bytes_;
  compression::SparseGradient scratch;
  if (!spare_pushes_.empty()) {
    scratch = std::move(spare_pushes_.back());
    spare_pushes_.pop_back();
  }
  auto res = compression::decode(payload, limits, scratch);
  if (!res.value) spare_pushes_.push_back(std::move(scratch));
  return res;
}

uint64_t Aggregator::modelChecksum() {
  if (!model_checksum_) model_checksum_ = checksum(params_);
  return *model_checksum_;
}

std::optional<uint64_t> Aggregator::previousChecksum() {
  if (!previous_known_) return std::nullopt;
  if (!previous_checksum_) {
    std::vector<float> before = params_;
    for (size_t i = 0; i < previous_indices_.size(); ++i)
      before[previous_indices_[i]] = previous_values_[i];
    previous_checksum_ = checksum(before);
  }
  return previous_checksum_;
}

void Aggregator::keepPrevious() {
  previous_checksum_ = model_checksum_;  // when already computed, it is model_{round-1}'s
  // A dense update's welcome would be no smaller than the model: nobody asks for its checksum.
  previous_known_ = !update_.isDense();
  previous_indices_.clear();
  previous_values_.clear();
  if (!previous_known_) return;
  previous_indices_.assign(update_.indices.begin(), update_.indices.end());
  previous_values_.resize(previous_indices_.size());
  for (size_t i = 0; i < previous_indices_.size(); ++i)
    previous_values_[i] = params_[previous_indices_[i]];
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

namespace {

// One pass over a step (it is memory-bound, so the four things it asks are asked together):
// delta += residual (an empty residual adds nothing), whether delta or params + delta is not
// finite, and the non-zeros of the aggregate and of delta. No early exit: it vectorizes.
Aggregator::StepScan scanStep(std::vector<float>& delta, const std::vector<float>& residual,
                              const std::vector<float>& params,
                              const std::vector<float>& aggregate) {
  const size_t n = delta.size();
  if (params.size() != n || aggregate.size() != n || (!residual.empty() && residual.size() != n))
    throw std::logic_error("scanStep: buffers of different sizes");
  uint32_t bad = 0, aggregate_nz = 0, delta_nz = 0;
  float* d = delta.data();
  const float* p = params.data();
  const float* a = aggregate.data();
  auto pass = [&](const float* r) {
    for (size_t j = 0; j < n; ++j) {
      const float x = r ? d[j] + r[j] : d[j];
      d[j] = x;
      bad |= nonFiniteBit(x) | nonFiniteBit(p[j] + x);
      aggregate_nz += uint32_t(a[j] != 0.0f);
      delta_nz += uint32_t(x != 0.0f);
    }
  };
  if (residual.empty()) {
    pass(nullptr);
  } else {
    pass(residual.data());
  }
  return {bad != 0, aggregate_nz, delta_nz};
}

}  // namespace

Aggregator::StepScan Aggregator::deltaOf(uint64_t round) {
  // A step of huge finite pushes can overflow: not taken, the model and momentum kept.
  // Every entry of delta_ and of the new velocity is written: no pass to clear them first. The
  // velocity before the step stays in velocity_before_ (swapped out, not copied).
  delta_.resize(params_.size());
  velocity_before_.resize(params_.size());
  optimizer_.swapVelocity(velocity_before_);
  optimizer_.stepFrom(velocity_before_, aggregate_, round, delta_);
  StepScan scan = scanStep(delta_, download_residual_, params_, aggregate_);
  if (scan.refused) {
    spdlog::warn("round {}: the aggregated step overflows the model; not taken", round);
    optimizer_.swapVelocity(velocity_before_);
    std::fill(delta_.begin(), delta_.end(), 0.0f);
    scan.delta_non_zeros = 0;
  }
  return scan;
}

namespace {

// `update` = `delta` (with `non_zeros` of them) as sparse coordinates when fewer than half are
// non-zero, else dense: then delta's buffer becomes the update's (no copy) and delta holds the
// update's old one, to be written whole by the next step.
void updateOf(std::vector<float>& delta, size_t non_zeros, compression::SparseGradient& update) {
  update.dim = uint32_t(delta.size());
  update.indices.clear();
  if (non_zeros * 2 >= delta.size()) {
    update.values.swap(delta);
    return;
  }
  update.values.clear();
  for (uint32_t j = 0; j < delta.size(); ++j) {
    if (delta[j] != 0.0f) {
      update.indices.push_back(j);
      update.values.push_back(delta[j]);
    }
  }
}

}  // namespace

size_t Aggregator::downloadCount(size_t pushed) const {
  if (robustness_.download_ratio <= 0.0) return pushed;
  return size_t(std::ceil(robustness_.download_ratio * double(params_.size())));
}

void Aggregator::broadcastOf(size_t count, size_t non_zeros) {
  std::vector<float>& pending = delta_;
  if (count >= non_zeros) {
    download_residual_.clear();
    updateOf(pending, non_zeros, update_);
    return;
  }
  update_.dim = uint32_t(pending.size());
  selector_.select(pending, uint32_t(count), update_.indices, update_.values);
  const size_t dim = pending.size();
  // The residual is the step less what goes now: delta_'s buffer becomes it (no copy), and the
  // old residual's buffer is the next round's delta_ (written whole there).
  download_residual_.swap(delta_);
  for (uint32_t j : update_.indices) download_residual_[j] = 0.0f;
  if (update_.indices.size() * 2 >= dim) {
    dense_.assign(dim, 0.0f);
    for (size_t i = 0; i < update_.indices.size(); ++i)
      dense_[update_.indices[i]] = update_.values[i];
    update_.indices.clear();
    update_.values.swap(dense_);  // dense_ keeps the other buffer for a later round
  }
}

std::optional<double> Aggregator::clipNorm(const compression::SparseGradient& push) const {
  if (!(robustness_.clip_multiple > 0.0)) return std::nullopt;
  return pushNorm(push);
}

uint32_t Aggregator::clipPushes(const std::vector<Worker*>& pushers) {
  if (!(robustness_.clip_multiple > 0.0)) return 0;
  std::vector<double> norms;
  for (const Worker* w : pushers)
    norms.push_back(w->pending_norm ? *w->pending_norm : pushNorm(*w->pending));
  // A round of fewer than two non-zero pushes is held to the last round that had them.
  const auto non_zero = std::count_if(norms.begin(), norms.end(), [](double x) { return x > 0; });
  if (non_zero >= 2) reference_norm_ = lowerMedianNonZero(norms);
  if (!reference_norm_) return 0;
  const double bound = robustness_.clip_multiple * *reference_norm_;
  uint32_t clipped = 0;
  for (size_t i = 0; i < pushers.size(); ++i) {
    if (!clipTo(*pushers[i]->pending, norms[i], bound)) continue;
    ++pushers[i]->rec.pushes_clipped;
    ++clipped;
  }
  return clipped;
}

void Aggregator::combine(const std::vector<Worker*>& pushers, double& loss) {
  std::vector<uint64_t> samples;
  for (const Worker* w : pushers) samples.push_back(w->samples);
  const PushWeights pw =
      cappedWeights(samples, shareCap(robustness_.max_worker_share, pushers.size()));
  double weighted_loss = 0.0;
  for (size_t i = 0; i < pushers.size(); ++i) weighted_loss += pw.weights[i] * pushers[i]->loss;
  loss = pw.normaliser > 0 ? weighted_loss / pw.normaliser : 0.0;
  if (robustness_.robust != config::RobustRule::kNone) {
    std::vector<const compression::SparseGradient*> pushes;
    for (const Worker* w : pushers) pushes.push_back(&*w->pending);
    aggregate_ =
        robustAggregate(pushes, params_.size(), robustness_.robust, robustness_.trim_fraction);
    return;
  }
  size_t first = 0;
  if (!pushers.empty() && pushers[0]->pending->isDense() &&
      pushers[0]->pending->dim == params_.size()) {
    // A dense first push is written over the sum, not added to a cleared one: 0 + w x, the same
    // bits as the addition, without the pass that clears it.
    const float w = float(pw.weights[0] / pw.normaliser);
    const std::vector<float>& v = pushers[0]->pending->values;
    aggregate_.resize(params_.size());
    for (size_t j = 0; j < v.size(); ++j) aggregate_[j] = 0.0f + w * v[j];
    first = 1;
  } else {
    aggregate_.assign(params_.size(), 0.0f);
  }
  for (size_t i = first; i < pushers.size(); ++i)
    compression::addScaled(*pushers[i]->pending, float(pw.weights[i] / pw.normaliser), aggregate_);
}

StepResult Aggregator::step(Membership& members, uint64_t round) {
  // In worker-id order, weighted by samples over the workers that pushed (renormalised).
  StepResult r;
  std::vector<Worker*> pushers;
  for (auto& [id, w] : members.all()) {
    if (w.pending) pushers.push_back(&w);
  }
  r.participants = uint32_t(pushers.size());
  r.clipped = clipPushes(pushers);
  combine(pushers, r.train_loss);
  // The coordinates the pushes carried: a push of every coordinate (dense, or sparse-coded with
  // all of them) carries every one, zeros included.
  const bool full_push = std::any_of(pushers.begin(), pushers.end(), [&](const Worker* w) {
    return w->pending->nonZeros() == params_.size();
  });
  for (Worker* w : pushers) {
    spare_pushes_.push_back(std::move(*w->pending));
    w->dropPush();
  }
  const StepScan scan = deltaOf(round);
  r.refused = scan.refused;
  const size_t pushed = full_push ? params_.size() : scan.aggregate_non_zeros;
  if (r.refused) {
    // A refused step sends nothing and keeps the residual.
    update_.dim = uint32_t(params_.size());
    update_.indices.clear();
    update_.values.clear();
  } else {
    broadcastOf(downloadCount(pushed), scan.delta_non_zeros);
  }
  // A worker may re-join one round behind: the previous model's checksum tells it.
  keepPrevious();
  compression::addScaled(update_, 1.0f, params_);  // as every replica adds it
  model_checksum_.reset();
  std::vector<uint8_t> bytes = encoded_->take();
  compression::encodeUpdateInto(update_, bytes);
  last_update_ = Payload::shared(encoded_->share(std::move(bytes)));
  return r;
}

}  // namespace tern::server
