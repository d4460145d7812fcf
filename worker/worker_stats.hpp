#pragma once
// A worker's counters, as /status, /metrics and the simulator's results show them.
#include <cstdint>
#include <string>

namespace tern::worker {

struct WorkerStats {
  uint64_t rounds = 0;
  uint64_t pushed_bytes = 0;
  uint64_t probe_bytes = 0;
  uint64_t received_bytes = 0;  // every coordinator message, as it came off the wire
  uint64_t rejoins = 0;
  uint64_t stale_welcomes = 0;  // welcomes answering an earlier join, ignored
  uint64_t rejected = 0;        // coordinator messages this worker refused
  uint64_t repushes = 0;        // rounds the coordinator asked for again after refusing the push
  uint64_t taken_back = 0;      // pushes refused as late whose content went back into the residual
  uint64_t non_finite_gradients = 0;  // pushes without a gradient: it overflowed (not finite)
  uint64_t residuals_dropped =
      0;                 // error feedback's residual dropped: adding the gradient overflowed
  uint64_t trimmed = 0;  // threshold pushes cut to the largest that fit the coordinator's limit
  // Pushes cut below the cap (or the threshold's count) so that the fitted link carries them
  // within the round's deadline.
  uint64_t deadline_trimmed = 0;
  // Pushes of a compressor without a level that the fitted link carries past the deadline.
  uint64_t deadline_late = 0;
  // Rounds sat out because the trainer failed (crashed, timed out, answered with a gradient of
  // another size or a non-finite one); the last failure's text is kept with it.
  uint64_t trainer_failures = 0;
  std::string last_trainer_error;
  uint64_t evaluations = 0;  // federated evaluations reported with pushes
  uint64_t evaluations_unusable =
      0;  // the trainer's evaluations dropped (not finite, not in [0, 1])
  uint32_t last_level = 0;
  double last_predicted_cost = 0.0;  // the tuner's prediction for the last push
  double last_predicted_improvement = 0.0;
  double last_step = 0.0;  // the step that prediction assumes
  double last_loss = 0.0;
  // The last federated evaluation it reported (round 0 and rows 0: none yet).
  uint64_t last_eval_round = 0;
  double last_eval_loss = 0.0;
  double last_eval_accuracy = 0.0;
  uint64_t last_eval_rows = 0;
  double data_share = 0.0;  // p_i, as the coordinator last said
};

}  // namespace tern::worker
