#pragma once
// Aggregation: the model's parameters and the optimizer, the weighted sum of a round's pushes
// sum_i p_i C_i(g_i) renormalised over those who pushed, the optimizer step with its finiteness
// guard, and the encoded update every worker applies to keep its replica bit-identical: the
// step's largest changes, the rest kept in a download residual for later broadcasts
// (docs/downloads.md). Before
// the sum, the defences of robust_aggregation.hpp: weights capped, norms clipped, and optionally
// a coordinate-wise trimmed mean or median instead of the weighted sum.
#include <cstdint>
#include <optional>
#include <vector>

#include "common/compression/codec.hpp"
#include "common/compression/top_k_selection.hpp"
#include "common/config/settings.hpp"
#include "common/ml/optimizer.hpp"
#include "common/util/buffer_pool.hpp"
#include "proto/payload.hpp"
#include "server/membership.hpp"

namespace tern::server {

struct StepResult {
  double train_loss = 0.0;  // the pushers' losses weighted by samples
  uint32_t participants = 0;
  uint32_t clipped = 0;  // pushes whose norm was clipped
  bool refused = false;  // the step would have made the model or momentum non-finite: not taken
};

class Aggregator {
 public:
  Aggregator(const ml::OptimizerSpec& optimizer, std::vector<float> initial,
             size_t max_message_bytes, const config::AggregationSettings& robustness = {});

  // Decodes a push's gradient for this model (dimension and size limits), into the buffers of a
  // push the last step let go of when there is one.
  compression::DecodeResult decode(std::span<const uint8_t> payload);
  // A push's norm when the step clips norms (taken as the push arrives, so that the round's close
  // need not pass over every push again); nullopt when it does not.
  std::optional<double> clipNorm(const compression::SparseGradient& push) const;
  // Combines the workers' pending gradients (in id order, clearing them; clipped pushes counted
  // in their records) and steps the model.
  StepResult step(Membership& members, uint64_t round);

  const std::vector<float>& parameters() const { return params_; }
  const std::vector<float>& velocity() const { return optimizer_.velocity(); }
  // The changes no broadcast has carried yet (empty while there are none).
  const std::vector<float>& downloadResidual() const { return download_residual_; }
  size_t dim() const { return params_.size(); }
  // The encoded update from model_{round-1} to model_{round}; empty before the first step.
  const Payload& lastUpdate() const { return last_update_; }
  // tern::checksum of model_{round-1}, once a round has closed with an update smaller than the
  // model (a replica one round behind is then welcomed with it); computed when first asked.
  std::optional<uint64_t> previousChecksum();
  // tern::checksum of the model, computed at most once per round.
  uint64_t modelChecksum();
  double learningRate(uint64_t round) const { return optimizer_.learningRate(round); }
  // The largest frame a worker is sent: the model's floats, or a dense update with its header.
  uint64_t largestFrameBytes();
  // Restoring: parameters, momentum and the download residual (empty: none) from a checkpoint
  // (already checked).
  void restore(std::vector<float> params, std::vector<float> velocity,
               std::vector<float> download_residual = {});

  // What the pass over a step found: whether it overflows, and the non-zero coordinates of the
  // aggregate (what the pushes carried) and of the step (what a broadcast could carry).
  struct StepScan {
    bool refused = false;
    size_t aggregate_non_zeros = 0;
    size_t delta_non_zeros = 0;
  };

 private:
  // delta_ = the optimizer's step on aggregate_ plus the download residual; zero (momentum kept)
  // when not finite.
  StepScan deltaOf(uint64_t round);
  // How many coordinates a broadcast carries when the round's pushes carried `pushed`.
  size_t downloadCount(size_t pushed) const;
  // update_ = the `count` largest entries of delta_ (all when they fit; it has `non_zeros`); the
  // rest becomes the download residual.
  void broadcastOf(size_t count, size_t non_zeros);
  // Keeps what the update is about to change of the model (before it is applied), so that
  // model_{round-1} can be checksummed later without a pass over the model every round.
  void keepPrevious();
  // Clips the pushes' norms to clip_multiple times the round's median; returns how many.
  uint32_t clipPushes(const std::vector<Worker*>& pushers);
  // aggregate_ = the round's aggregate of the (clipped) pushes; their losses' weighted mean.
  void combine(const std::vector<Worker*>& pushers, double& loss);
  size_t max_message_bytes_;
  config::AggregationSettings robustness_;
  std::optional<double> reference_norm_;  // the last median of two or more non-zero pushes
  std::vector<float> params_;
  ml::SgdOptimizer optimizer_;
  std::vector<float> download_residual_;
  compression::TopKSelector selector_;
  Payload last_update_;  // shared by every worker's round start (no copy per worker)
  // model_{round-1}: the model with these values at these coordinates (the last update's).
  bool previous_known_ = false;
  std::vector<uint32_t> previous_indices_;
  std::vector<float> previous_values_;
  std::optional<uint64_t> previous_checksum_;
  std::optional<uint64_t> model_checksum_;
  uint64_t largest_frame_bytes_ = 0;
  // A round's model-sized work buffers, kept across rounds (no allocation in a steady round).
  std::vector<float> aggregate_;
  std::vector<float> delta_;
  std::vector<float> velocity_before_;
  std::vector<float> dense_;
  compression::SparseGradient update_;
  // Buffers of pushes a step let go of, refilled by the next decodes (as many as pushed at once).
  std::vector<compression::SparseGradient> spare_pushes_;
  // The encoded updates' buffers: one comes back once every send of its round is on the wire.
  std::shared_ptr<BufferPool> encoded_ = BufferPool::make();
};

}  // namespace tern::server
