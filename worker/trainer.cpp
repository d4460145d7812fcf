#include "worker/trainer.hpp"

#include <algorithm>
#include <random>

#include "common/util/rng.hpp"

namespace tern::worker {

ShardTrainer::ShardTrainer(std::shared_ptr<const ml::Dataset> shard,
                           std::function<bool()> cancelled, std::shared_ptr<const ml::Dataset> eval,
                           std::shared_ptr<TrainerScratch> scratch)
    : shard_(std::move(shard)),
      cancelled_(std::move(cancelled)),
      eval_(std::move(eval)),
      scratch_(scratch ? std::move(scratch) : std::make_shared<TrainerScratch>()) {}

std::optional<Evaluation> ShardTrainer::evaluate(const ml::Model& model,
                                                 std::span<const float> at) {
  const size_t n = eval_->rows();
  const size_t chunk = ml::chunkRows(at.size());
  // The loss in chunks of rows: the mean of the chunks' means weighted by their rows.
  std::vector<size_t> rows;
  double loss_sum = n <= chunk ? model.loss(at, *eval_) * double(n) : 0.0;
  for (size_t begin = 0; n > chunk && begin < n; begin += chunk) {
    if (begin > 0 && cancelled()) return std::nullopt;
    rows.resize(std::min(chunk, n - begin));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = begin + i;
    loss_sum += model.loss(at, *eval_, rows) * double(rows.size());
  }
  if (cancelled()) return std::nullopt;
  const double accuracy = ml::chunkedAccuracy(model, at, *eval_, chunk, scratch_->batch);
  return Evaluation{loss_sum / double(n), accuracy, n};
}

std::optional<double> ShardTrainer::batchGradient(const ml::Model& model, std::span<const float> at,
                                                  std::span<const size_t> rows,
                                                  std::vector<float>& grad) {
  return ml::chunkedLossAndGradient(model, at, *shard_, rows, ml::chunkRows(at.size()),
                                    scratch_->batch, scratch_->chunk_grad, grad, cancelled_);
}

std::optional<GradientResult> ShardTrainer::gradient(const GradientRequest& request) {
  GradientResult out;
  out.request_id = request.id;
  // A stop that came while the round start was on its way.
  if (cancelled()) return std::nullopt;
  // The evaluation is of the parameters the round starts from, before this worker trains.
  if (request.evaluate && eval_ && eval_->rows() > 0) {
    out.evaluation = evaluate(*request.model, *request.params);
    if (!out.evaluation) return std::nullopt;
  }
  if (!train(request, out)) return std::nullopt;
  return out;
}

uint64_t minibatchSeed(const GradientRequest& request) {
  const uint64_t seed =
      deriveSeed(request.plan.seed ^ (uint64_t(request.worker_id) << 32), request.round);
  return request.attempt == 0 ? seed : deriveSeed(seed, request.attempt);
}

bool ShardTrainer::train(const GradientRequest& request, GradientResult& out) {
  const auto& params = *request.params;
  const auto& plan = request.plan;
  const size_t n = shard_->rows();
  const size_t batch = std::min<size_t>(plan.batch_size, n);
  Rng rng(minibatchSeed(request));
  auto draw = [&] {
    std::vector<size_t> rows(batch);
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    for (auto& r : rows) r = pick(rng);
    return rows;
  };
  out.gradient.assign(params.size(), 0.0f);
  const uint32_t steps = std::max<uint32_t>(1, plan.local_steps);
  if (steps == 1) {
    out.rows_used = batch;
    const auto mean = batchGradient(*request.model, params, draw(), out.gradient);
    if (!mean) return false;
    out.loss = *mean;
    return true;
  }
  // Local SGD: the pushed "gradient" is the model delta divided by the local step size, so the
  // coordinator's learning rate keeps its meaning.
  std::vector<float> local = params;
  std::vector<float> g(params.size());
  for (uint32_t s = 0; s < steps; ++s) {
    if (s > 0 && cancelled()) return false;
    const auto step_loss = batchGradient(*request.model, local, draw(), g);
    if (!step_loss) return false;
    out.loss += *step_loss;
    for (size_t j = 0; j < local.size(); ++j) local[j] -= float(plan.local_lr) * g[j];
  }
  out.loss /= steps;
  out.rows_used = uint64_t(batch) * steps;
  for (size_t j = 0; j < local.size(); ++j) {
    out.gradient[j] = float((params[j] - local[j]) / plan.local_lr);
  }
  return true;
}

}  // namespace tern::worker
