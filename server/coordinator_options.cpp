#include "server/coordinator_options.hpp"

namespace tern::server {

CoordinatorOptions coordinatorOptions(const config::CoordinatorSettings& s) {
  CoordinatorOptions o;
  o.min_workers = s.min_workers;
  o.max_workers = s.max_workers;
  o.max_rounds = s.max_rounds;
  o.target_accuracy = s.target_accuracy;
  o.round_deadline_seconds = s.round_deadline_seconds;
  o.quorum_share = s.quorum_share;
  o.heartbeat_seconds = s.heartbeat_seconds;
  o.worker_patience_seconds = s.worker_patience_seconds;
  o.eval_every = s.eval_every;
  o.checkpoint_every = s.checkpoint.every;
  o.max_message_bytes = s.max_message_bytes;
  o.model = s.model;
  o.optimizer = s.optimizer;
  o.training = s.training;
  o.allocation = s.allocation;
  o.aggregation = s.aggregation;
  o.stragglers = s.stragglers;
  o.joins = s.joins;
  return o;
}

}  // namespace tern::server
