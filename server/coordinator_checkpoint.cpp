// The core's side of its checkpoint: the state value it is encoded from, and the core rebuilt
// from a decoded one.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "server/coordinator_core.hpp"

namespace tern::server {

CoordinatorCore::CoordinatorCore(const CoordinatorOptions& options,
                                 std::unique_ptr<ml::Model> model, bool evaluates, uint64_t session,
                                 CheckpointState s, double now)
    : CoordinatorCore(options, std::move(model), evaluates, session, now) {
  if (s.allocation_method != allocation::methodName(options.allocation.method)) {
    spdlog::warn("checkpoint was written with allocation method {}, now {}: caps are re-planned",
                 s.allocation_method, allocation::methodName(options.allocation.method));
  }
  if (s.training_seed != options.training.seed) {
    spdlog::warn("checkpoint was written with training seed {}, now {}", s.training_seed,
                 options.training.seed);
  }
  aggregator_.restore(std::move(s.parameters), std::move(s.velocity),
                      std::move(s.download_residual));
  round_ = s.round;
  for (auto& [id, w] : s.workers) w.last_seen = now;  // remembered from now on
  membership_.restore(std::move(s.workers), s.next_worker_id);
  planner_.restore(s.mean_price, s.rounds_since_plan);
  counters_ = std::move(s.counters);
  if (s.accuracy_known) last_accuracy_ = s.last_accuracy;
  // time_s goes on from the checkpoint's once training resumes.
  resumed_elapsed_ = std::max(0.0, s.elapsed_seconds);
  RoundRecord& rec = last_record_;  // the summary row if nothing more happens
  rec.round = s.round > 0 ? s.round - 1 : 0;
  rec.time_s = s.elapsed_seconds;
  rec.train_loss = s.last_train_loss;
  rec.test_accuracy = s.last_accuracy;
  rec.accuracy_measured = s.accuracy_known;
  recordTotals(rec);
  // At or past max_rounds nothing is left to train; a run that reached its target stays done.
  const bool reached_target =
      options.target_accuracy > 0 && s.last_accuracy >= options.target_accuracy;
  const bool done = s.round >= options.max_rounds || (s.finished && reached_target);
  phase_ = RoundPhase(done ? Phase::kDone : Phase::kResuming);
}

std::unique_ptr<CoordinatorCore> CoordinatorCore::restore(const CoordinatorOptions& options,
                                                          std::unique_ptr<ml::Model> model,
                                                          bool evaluates, uint64_t session,
                                                          const std::string& checkpoint_bytes,
                                                          double now) {
  CheckpointState state = decodeCheckpoint(checkpoint_bytes, options);
  return std::make_unique<CoordinatorCore>(options, std::move(model), evaluates, session,
                                           std::move(state), now);
}

std::string CoordinatorCore::checkpoint(double now) const {
  CheckpointState s;
  s.session = session_;
  s.round = round_;
  s.model = model_->spec();
  s.training_seed = options_.training.seed;
  s.parameters = aggregator_.parameters();
  s.velocity = aggregator_.velocity();
  s.download_residual = aggregator_.downloadResidual();
  s.next_worker_id = membership_.nextId();
  s.workers = membership_.all();
  s.mean_price = planner_.meanPrice();
  s.allocation_method = allocation::methodName(options_.allocation.method);
  s.rounds_since_plan = planner_.roundsSincePlan();
  s.counters = counters_;
  s.last_accuracy = lastAccuracy();
  s.accuracy_known = last_accuracy_.has_value();
  s.last_train_loss = last_record_.train_loss;
  // Waiting for the workers of a restored run is not training: its time stays.
  s.elapsed_seconds = start_time_ ? now - *start_time_ : resumed_elapsed_;
  s.finished = finished();
  return encodeCheckpoint(s);
}

}  // namespace tern::server
