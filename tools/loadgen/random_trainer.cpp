#include "tools/loadgen/random_trainer.hpp"

#include <random>

namespace tern::loadgen {

std::optional<worker::GradientResult> RandomTrainer::gradient(
    const worker::GradientRequest& request) {
  worker::GradientResult r;
  r.request_id = request.id;
  r.gradient.resize(request.params ? request.params->size() : 0);
  std::normal_distribution<float> noise(0.0f, float(scale_));
  for (auto& g : r.gradient) g = noise(rng_);
  r.rows_used = request.plan.batch_size;
  return r;
}

}  // namespace tern::loadgen
