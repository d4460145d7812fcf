#pragma once
// The coordinator's optimizer: SGD with (heavy-ball) momentum and a step-decay learning-rate
// schedule. It produces the update delta that both the coordinator and every worker add to
// their parameters, so all replicas stay bit-identical: x_{r+1}[j] = x_r[j] + delta[j] in fp32.
#include <cstdint>
#include <span>
#include <vector>

namespace tern::ml {

struct OptimizerSpec {
  double lr = 0.1;
  double momentum = 0.0;
  double decay = 1.0;        // multiply lr by decay every decay_every rounds
  uint64_t decay_every = 0;  // 0 = constant learning rate
};

class SgdOptimizer {
 public:
  SgdOptimizer(const OptimizerSpec& spec, size_t params);
  // Computes delta from the aggregated gradient for this round (velocity kept internally).
  void step(std::span<const float> gradient, uint64_t round, std::span<float> delta);
  // The same step from `previous` as the velocity before it (every entry of the kept velocity
  // is written, the same bits as step() from it): with swapVelocity, a caller keeps the velocity
  // before a step, and puts it back if the step is not taken, without copying it.
  void stepFrom(std::span<const float> previous, std::span<const float> gradient, uint64_t round,
                std::span<float> delta);
  // Exchanges the kept velocity with `v` (of the same size).
  void swapVelocity(std::vector<float>& v) { velocity_.swap(v); }
  double learningRate(uint64_t round) const;
  const std::vector<float>& velocity() const { return velocity_; }
  void setVelocity(std::vector<float> v) { velocity_ = std::move(v); }

 private:
  OptimizerSpec spec_;
  std::vector<float> velocity_;
};

}  // namespace tern::ml
