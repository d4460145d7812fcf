#include "worker/welcome_terms.hpp"

#include <spdlog/spdlog.h>

#include <cmath>

#include "common/compression/compressor_support.hpp"
#include "proto/model_spec.hpp"

namespace tern::worker {

namespace {

// The training settings' problem, or "".
std::string trainingProblem(const wire::TrainingSettings& t) {
  if (t.batch_size() == 0) return "training settings have batch size 0";
  if (t.local_steps() > config::kMaxLocalSteps) {
    return "training settings ask for " + std::to_string(t.local_steps()) +
           " local steps, more than " + std::to_string(config::kMaxLocalSteps);
  }
  if (t.local_steps() > 1 && !(std::isfinite(t.local_lr()) && t.local_lr() > 0.0)) {
    return "training settings have local steps with local_lr " + std::to_string(t.local_lr());
  }
  return "";
}

}  // namespace

namespace {

// An external trainer's model: the welcome's must be external, of the trainer's layout.
OrRefusal<std::shared_ptr<ml::Model>> externalModel(const ml::ModelSpec& spec,
                                                    const LocalData& data) {
  using Then = WelcomeRefusal::Then;
  if (spec.kind != "external") {
    return WelcomeRefusal{"the coordinator trains a built-in " + spec.kind +
                              " model; this worker's trainer is external (model.kind external)",
                          Then::ask_later};
  }
  if (spec.tensors != data.tensors) {
    return WelcomeRefusal{"the coordinator's model has layout " + ml::describeLayout(spec.tensors) +
                              ", this worker's trainer " + ml::describeLayout(data.tensors),
                          Then::ask_later};
  }
  try {
    return std::shared_ptr<ml::Model>(ml::makeModel(spec));
  } catch (const std::exception& e) {
    return WelcomeRefusal{std::string("bad model spec: ") + e.what()};
  }
}

}  // namespace

OrRefusal<std::shared_ptr<ml::Model>> welcomeModel(const wire::Welcome& w, const LocalData& data) {
  using Then = WelcomeRefusal::Then;
  const ml::ModelSpec spec = fromWire(w.model());
  if (auto why = trainingProblem(w.training()); !why.empty()) return WelcomeRefusal{why};
  if (data.external()) return externalModel(spec, data);
  const ml::Dataset& shard = *data.shard;
  if (spec.kind == "external") {
    return WelcomeRefusal{
        "the coordinator trains an external model; this worker's trainer is the "
        "built-in one (trainer.kind external: docs/python.md)",
        Then::ask_later};
  }
  if (spec.features != shard.features()) {
    return WelcomeRefusal{"model expects " + std::to_string(spec.features) +
                              " features, shard has " + std::to_string(shard.features()),
                          Then::ask_later};
  }
  // A spec no model can be made from is the coordinator's message at fault (refused); only a
  // valid model that cannot learn this shard's labels ends the worker.
  std::shared_ptr<ml::Model> model;
  try {
    model = ml::makeModel(spec);
  } catch (const std::exception& e) {
    return WelcomeRefusal{std::string("bad model spec: ") + e.what()};
  }
  if (std::string why = ml::labelsUnfit(spec, shard); !why.empty()) {
    return WelcomeRefusal{"the coordinator's model cannot train on this shard: " + why,
                          Then::ask_later};
  }
  return model;
}

OrRefusal<std::vector<float>> welcomeParams(std::span<const uint8_t> payload, size_t num_params) {
  // The size is checked before anything is allocated for the parameters.
  if (payload.size() != num_params * sizeof(float))
    return WelcomeRefusal{"welcome payload has " + std::to_string(payload.size()) +
                          " bytes, the model's parameters need " +
                          std::to_string(num_params * sizeof(float))};
  std::vector<float> params(num_params);
  [[maybe_unused]] const bool copied = bytesToFloats(payload, params);  // size checked
  if (!compression::detail::allFinite(params))
    return WelcomeRefusal{"welcome parameters hold a non-finite value"};
  return params;
}

namespace {

// Pushes must fit in the coordinator's largest message: the level is capped so that the codec's
// bound holds (a threshold push keeps its largest coordinates up to that count, the rest staying
// in the residual). A fixed scheme (identity, fp16, qsgd) that cannot fit never will, and no
// re-join changes that.
std::optional<WelcomeRefusal> limitToPeer(PushBuilder& push, const PushOptions& o,
                                          uint64_t peer_max, uint32_t d) {
  const bool threshold = o.strategy.threshold;
  if (peer_max == 0) return std::nullopt;
  const uint32_t size_cap = push.limitTo(peer_max, d);
  const size_t largest = push.largestPush(d);
  const std::string& name = o.compressor.name;
  if (size_cap > 0 && size_cap < d && threshold) {
    spdlog::warn(
        "a threshold push of this model can take up to {} bytes, more than the coordinator's "
        "max_message_bytes of {}: pushes denser than {} coordinates send their largest {}{}",
        largest, peer_max, size_cap, size_cap,
        push.errorFeedback() ? " and keep the rest in the residual" : " and drop the rest");
  } else if (size_cap == 0) {
    return WelcomeRefusal{"a push of compressor '" + name +
                              "' does not fit in the coordinator's max_message_bytes of " +
                              std::to_string(peer_max) + " (this model's takes up to " +
                              std::to_string(largest) +
                              " bytes): raise it there, or choose a compressor that sends fewer",
                          WelcomeRefusal::Then::ask_later};
  }
  return std::nullopt;
}

}  // namespace

OrRefusal<std::unique_ptr<PushBuilder>> welcomePushes(const wire::Welcome& w,
                                                      const PushOptions& options,
                                                      const ml::Model& model,
                                                      const ml::Dataset* shard, uint32_t dim) {
  if (!std::isfinite(w.threshold()) || w.threshold() < 0.0)
    return WelcomeRefusal{"welcome threshold must be finite and >= 0, got " +
                          std::to_string(w.threshold())};
  const std::optional<double> bound = shard ? model.smoothness(*shard) : std::nullopt;
  const double smoothness = bound.value_or(1.0);
  if (!std::isfinite(smoothness) || !(smoothness > 0.0)) {
    return WelcomeRefusal{"the shard's smoothness bound is " + std::to_string(smoothness) +
                              " (a feature too large for its type?)",
                          WelcomeRefusal::Then::give_up};
  }
  std::unique_ptr<PushBuilder> push;
  try {
    push = std::make_unique<PushBuilder>(options, w.threshold(), bound);
  } catch (const std::exception& e) {
    return WelcomeRefusal{std::string("cannot compress as welcomed: ") + e.what()};
  }
  if (auto refusal = limitToPeer(*push, options, w.max_message_bytes(), dim)) return *refusal;
  // A deadline that is no deadline (not finite, negative) is taken as not said.
  const double deadline = w.round_deadline_seconds();
  push->setDeadline(std::isfinite(deadline) && deadline > 0.0 ? std::optional(deadline)
                                                              : std::nullopt);
  return push;
}

}  // namespace tern::worker
