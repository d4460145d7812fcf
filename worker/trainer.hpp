#pragma once
// What computes a worker's gradient. The core asks for one (a GradientRequest) when a round
// starts and takes the answer as an event (WorkerCore::onGradient); the driver fulfils the
// request with a Trainer: the daemon on a compute thread, the simulator and the tests at once.
// ShardTrainer is the built-in one: the configured model over the worker's own shard.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"

namespace tern::worker {

// The coordinator's training settings for the rounds of one welcome.
struct TrainingPlan {
  uint32_t batch_size = 1;
  uint32_t local_steps = 1;  // > 1: local SGD, the push is the model delta / local_lr
  double local_lr = 0.0;
  uint64_t seed = 0;
};

// One gradient the core waits for. params and model stay as they are until it is answered or
// abandoned (the core holds its own copies), so a trainer may read them on another thread.
struct GradientRequest {
  uint64_t id = 0;  // the answer carries it back; the core ignores answers to other requests
  uint64_t round = 0;
  uint32_t worker_id = 0;
  std::shared_ptr<const std::vector<float>> params;
  std::shared_ptr<const ml::Model> model;
  TrainingPlan plan;
  bool evaluate = false;  // also evaluate at params (before training) on the held-out rows
  // > 0: the round's gradient asked again after this many failed attempts (a trainer's error):
  // the minibatches are drawn anew (minibatchSeed), so a failure tied to one does not repeat.
  uint32_t attempt = 0;
  // The round deadline the coordinator's welcome said (0: none): an external trainer's timeout
  // when its settings give none.
  double deadline_seconds = 0.0;
};

// The seed of a request's minibatches: the coordinator's training seed, this worker's id and the
// round; an attempt after failed ones mixes in its number.
uint64_t minibatchSeed(const GradientRequest& request);

// A model's quality on a trainer's held-out rows.
struct Evaluation {
  double loss = 0.0;
  double accuracy = 0.0;
  uint64_t rows = 0;
};

struct GradientResult {
  uint64_t request_id = 0;
  std::vector<float> gradient;  // the pseudo-gradient (a local-steps delta / local_lr)
  double loss = 0.0;
  uint64_t rows_used = 0;
  std::optional<Evaluation> evaluation;  // when asked and the trainer has held-out rows
  // Non-empty: the trainer failed this request (crashed, timed out, answered wrongly): why. The
  // worker sits the round out; gradient is then ignored.
  std::string failure;
};

class Trainer {
 public:
  virtual ~Trainer() = default;
  // The gradient `request` asks for; nullopt when the computation was abandoned (a stop).
  virtual std::optional<GradientResult> gradient(const GradientRequest& request) = 0;
};

// A trainer's work storage between gradients: the gathered minibatch (or a chunk of it) and one
// chunk's gradient. Trainers that never compute at the same time may share one (the simulator's
// thousands of workers do: a minibatch of 128 Fashion-MNIST rows is 392 KiB of floats).
struct TrainerScratch {
  ml::Dataset batch;
  std::vector<float> chunk_grad;
};

class ShardTrainer final : public Trainer {
 public:
  // `cancelled` (if given) is asked before the gradient and between its chunks and local steps:
  // true abandons it. It is called on the thread that computes. `eval` (if given): the held-out
  // rows a request that asks is evaluated on.
  // `scratch` (if given) is shared with other trainers that never compute at the same time.
  explicit ShardTrainer(std::shared_ptr<const ml::Dataset> shard,
                        std::function<bool()> cancelled = {},
                        std::shared_ptr<const ml::Dataset> eval = nullptr,
                        std::shared_ptr<TrainerScratch> scratch = nullptr);
  std::optional<GradientResult> gradient(const GradientRequest& request) override;

 private:
  // The mean loss of `rows` at `at` (its gradient in grad); nullopt when cancelled.
  std::optional<double> batchGradient(const ml::Model& model, std::span<const float> at,
                                      std::span<const size_t> rows, std::vector<float>& grad);
  // The model's loss and accuracy on the held-out rows at `at`; nullopt when cancelled.
  std::optional<Evaluation> evaluate(const ml::Model& model, std::span<const float> at);
  // The gradient (or local-steps delta) of `request` into out; false when cancelled.
  bool train(const GradientRequest& request, GradientResult& out);
  bool cancelled() const { return cancelled_ && cancelled_(); }

  std::shared_ptr<const ml::Dataset> shard_;
  std::function<bool()> cancelled_;
  std::shared_ptr<const ml::Dataset> eval_;
  std::shared_ptr<TrainerScratch> scratch_;  // never null
};

}  // namespace tern::worker
