#pragma once
// What the coordinator core acts on, taken once from the coordinator's settings: the terms of
// training, rounds and membership. Endpoints, files, keys and logging stay with the daemon.
#include <cstddef>
#include <cstdint>

#include "common/config/settings.hpp"

namespace tern::server {

struct CoordinatorOptions {
  uint32_t min_workers = 1;
  uint32_t max_workers = 1;  // workers tracked at once (alive or not yet forgotten)
  uint64_t max_rounds = 1;
  double target_accuracy = 0.0;  // 0 = run max_rounds
  double round_deadline_seconds = 1.0;
  double quorum_share = 0.0;  // data share a round needs to close at its deadline
  double heartbeat_seconds = 1.0;
  double worker_patience_seconds = 1.0;
  uint64_t eval_every = 0;
  uint64_t checkpoint_every = 0;  // rounds between checkpoints (0: only when asked)
  size_t max_message_bytes = 0;
  ml::ModelSpec model;
  ml::OptimizerSpec optimizer;
  config::TrainingSettings training;
  config::AllocationSettings allocation;
  config::AggregationSettings aggregation;
  config::StragglerSettings stragglers;
  config::JoinSettings joins;  // join rate per connection, a never-pushed member's seat
};

// The core's options from the validated settings.
CoordinatorOptions coordinatorOptions(const config::CoordinatorSettings& s);

}  // namespace tern::server
