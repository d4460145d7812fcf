#include "tools/loadgen/random_trainer.hpp"

#include <algorithm>
#include <random>

namespace tern::loadgen {

namespace {
// Draws per member: a prime, so that offsets wrap onto different coordinates each round. Drawing a
// fresh normal per coordinate cost more than the coordinator's whole round at 1e6 parameters.
constexpr size_t kPoolSize = 65521;
}  // namespace

RandomTrainer::RandomTrainer(uint64_t seed, double scale) : rng_(seed), pool_(kPoolSize) {
  std::normal_distribution<float> noise(0.0f, float(scale));
  for (auto& g : pool_) g = noise(rng_);
}

std::optional<worker::GradientResult> RandomTrainer::gradient(
    const worker::GradientRequest& request) {
  worker::GradientResult r;
  r.request_id = request.id;
  const size_t d = request.params ? request.params->size() : 0;
  r.gradient.reserve(d);  // filled by the copies alone: no pass to zero it first
  size_t from = size_t(rng_() % pool_.size());
  while (r.gradient.size() < d) {
    const size_t n = std::min(d - r.gradient.size(), pool_.size() - from);
    r.gradient.insert(r.gradient.end(), pool_.begin() + long(from), pool_.begin() + long(from + n));
    from = 0;
  }
  r.rows_used = request.plan.batch_size;
  return r;
}

}  // namespace tern::loadgen
