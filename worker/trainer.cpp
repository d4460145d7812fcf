#include "worker/trainer.hpp"

#include <algorithm>
#include <random>

#include "common/util/rng.hpp"

namespace tern::worker {

ShardTrainer::ShardTrainer(std::shared_ptr<const ml::Dataset> shard,
                           std::function<bool()> cancelled)
    : shard_(std::move(shard)), cancelled_(std::move(cancelled)) {}

std::optional<double> ShardTrainer::batchGradient(const ml::Model& model, std::span<const float> at,
                                                  std::span<const size_t> rows,
                                                  std::vector<float>& grad) {
  return ml::chunkedLossAndGradient(model, at, *shard_, rows, ml::chunkRows(at.size()), batch_,
                                    chunk_grad_, grad, cancelled_);
}

std::optional<GradientResult> ShardTrainer::gradient(const GradientRequest& request) {
  const auto& params = *request.params;
  const auto& plan = request.plan;
  const size_t n = shard_->rows();
  const size_t batch = std::min<size_t>(plan.batch_size, n);
  Rng rng(deriveSeed(plan.seed ^ (uint64_t(request.worker_id) << 32), request.round));
  auto draw = [&] {
    std::vector<size_t> rows(batch);
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    for (auto& r : rows) r = pick(rng);
    return rows;
  };
  GradientResult out;
  out.request_id = request.id;
  out.gradient.assign(params.size(), 0.0f);
  // A stop that came while the round start was on its way.
  if (cancelled()) return std::nullopt;
  const uint32_t steps = std::max<uint32_t>(1, plan.local_steps);
  if (steps == 1) {
    out.rows_used = batch;
    const auto mean = batchGradient(*request.model, params, draw(), out.gradient);
    if (!mean) return std::nullopt;
    out.loss = *mean;
    return out;
  }
  // Local SGD: the pushed "gradient" is the model delta divided by the local step size, so the
  // coordinator's learning rate keeps its meaning.
  std::vector<float> local = params;
  std::vector<float> g(params.size());
  for (uint32_t s = 0; s < steps; ++s) {
    if (s > 0 && cancelled()) return std::nullopt;
    const auto step_loss = batchGradient(*request.model, local, draw(), g);
    if (!step_loss) return std::nullopt;
    out.loss += *step_loss;
    for (size_t j = 0; j < local.size(); ++j) local[j] -= float(plan.local_lr) * g[j];
  }
  out.loss /= steps;
  out.rows_used = uint64_t(batch) * steps;
  for (size_t j = 0; j < local.size(); ++j) {
    out.gradient[j] = float((params[j] - local[j]) / plan.local_lr);
  }
  return out;
}

}  // namespace tern::worker
