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
  r.gradient.resize(request.params ? request.params->size() : 0);
  size_t from = size_t(rng_() % pool_.size());
  for (size_t done = 0; done < r.gradient.size();) {
    size_t n = std::min(r.gradient.size() - done, pool_.size() - from);
    std::copy_n(pool_.begin() + long(from), n, r.gradient.begin() + long(done));
    done += n;
    from = 0;
  }
  r.rows_used = request.plan.batch_size;
  return r;
}

}  // namespace tern::loadgen
