#pragma once
// A trainer that does not train: each gradient is seeded Gaussian noise of the model's size,
// times `scale`. tern-loadgen's workers answer their rounds with it, so that a coordinator can be
// driven by many protocol-complete workers at little CPU; a large scale makes a hostile member.
#include <cstdint>
#include <vector>

#include "common/util/rng.hpp"
#include "worker/trainer.hpp"

namespace tern::loadgen {

class RandomTrainer final : public worker::Trainer {
 public:
  RandomTrainer(uint64_t seed, double scale);
  // Noise of the request's parameter count (the member's pool of draws read from a seeded offset
  // onwards, wrapping); loss 0, every row of the plan's batch "used".
  std::optional<worker::GradientResult> gradient(const worker::GradientRequest& request) override;

 private:
  Rng rng_;
  std::vector<float> pool_;  // Gaussian draws times scale, drawn once
};

}  // namespace tern::loadgen
