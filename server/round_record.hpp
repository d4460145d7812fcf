#pragma once
// What the coordinator reports per worker and per closed round: the rows of the metrics CSV, the
// /status document and the checkpoint's worker table all start from these.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "message.hpp"

namespace tern::server {

// A worker's last federated evaluation, as its push reported it.
struct WorkerEvaluation {
  uint64_t round = 0;  // the model evaluated (the one that round started from)
  double loss = 0.0;
  double accuracy = 0.0;
  uint64_t rows = 0;
  bool known = false;
};

struct WorkerRecord {
  uint32_t id = 0;
  std::string name;
  uint32_t cap = 0;
  double threshold = 0.0;
  double share = 0.0;
  bool alive = false;
  bool pushed = false;
  wire::LinkModel link;
  uint64_t upload_bytes = 0;
  uint64_t download_bytes = 0;
  // The tuner's report with the worker's push of the round (zeros until it pushed, or when the
  // report was unusable): level T, predicted cost C(T), predicted improvement and its step.
  uint32_t level = 0;
  double predicted_cost = 0.0;
  double predicted_improvement = 0.0;
  double predicted_step = 0.0;
  // Robustness (docs/reliability.md, docs/security.md): rounds closed in a row without its push,
  // benched (not waited for; offered probe_round now and then), pushes whose norm was clipped.
  uint32_t missed_in_row = 0;
  bool benched = false;
  uint64_t probe_round = 0;
  // Benchings since it last pushed probe_every rounds in a row in time (not checkpointed): back
  // from the bench it is on probation (one miss benches it again) and each benching doubles the
  // rounds between its probes (StragglerBench).
  uint32_t benchings = 0;
  uint32_t in_time_streak = 0;  // rounds in a row it pushed in time, while benchings > 0
  uint64_t pushes_clipped = 0;
  WorkerEvaluation evaluation;  // the last usable one (not checkpointed)
};

// One row of the metrics CSV: counters are cumulative since the start of training.
struct RoundRecord {
  uint64_t round = 0;
  double time_s = 0.0;
  double train_loss = 0.0;
  double test_accuracy = 0.0;      // the last evaluation's (0 before the first)
  bool evaluated = false;          // evaluated at this round's close
  bool accuracy_measured = false;  // test_accuracy comes from an evaluation, this round's or before
  uint64_t upload_bytes = 0;
  uint64_t download_bytes = 0;
  uint64_t full_bytes = 0;
  uint32_t participants = 0;
  uint64_t late_pushes = 0;
  uint64_t rejected = 0;
  // The workers' evaluations of the model this round started from: their row-weighted mean
  // accuracy (test_accuracy too when there is no test_data) and the rows they cover (0: none).
  double federated_accuracy = 0.0;
  uint64_t federated_rows = 0;
  std::vector<WorkerRecord> workers;  // every known worker, by id
};

// The coordinator's run counters, under one name each in the core, the checkpoint and /status.
struct Counters {
  uint64_t upload_bytes = 0;
  uint64_t download_bytes = 0;
  uint64_t full_bytes = 0;
  uint64_t late_pushes = 0;
  uint64_t pushes_asked_again = 0;             // round starts sent again after a refused push
  uint64_t push_reports_unusable = 0;          // accepted pushes whose tuner report was unusable
  uint64_t steps_refused = 0;                  // aggregated steps that would have been non-finite
  uint64_t pushes_clipped = 0;                 // pushes whose norm was clipped to the bound
  uint64_t benched = 0;                        // times a member was benched as a straggler
  uint64_t evaluations_unusable = 0;           // pushes whose evaluation was dropped
  std::map<std::string, uint64_t> rejections;  // refused messages by reason
  uint64_t rejectedTotal() const;
};

}  // namespace tern::server
