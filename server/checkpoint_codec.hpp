#pragma once
// The coordinator's checkpoint: encode() serializes a state value, decode() checks the bytes
// against the configuration and returns the state value the core is rebuilt from.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/coordinator_options.hpp"
#include "server/membership.hpp"

namespace tern::server {

struct CheckpointState {
  uint64_t session = 0;
  uint64_t round = 0;  // the round being collected (its pushes are not kept: it is redone)
  ml::ModelSpec model;
  uint64_t training_seed = 0;
  std::vector<float> parameters, velocity;
  uint32_t next_worker_id = 0;
  std::map<uint32_t, Worker> workers;  // record, samples, instance and push price of each
  std::optional<allocation::PushPrice> mean_price;
  std::string allocation_method;
  uint64_t rounds_since_plan = 0;
  Counters counters;
  double last_accuracy = 0.0;  // the last evaluation's (0 before the first)
  bool accuracy_known = false;
  double last_train_loss = 0.0;
  double elapsed_seconds = 0.0;  // training time reached
  bool finished = false;
};

std::string encodeCheckpoint(const CheckpointState& state);
// Throws std::runtime_error when the bytes do not parse, are damaged, or do not fit the
// configured model. Workers with a name a join would refuse are dropped (logged).
CheckpointState decodeCheckpoint(const std::string& bytes, const CoordinatorOptions& options);

}  // namespace tern::server
