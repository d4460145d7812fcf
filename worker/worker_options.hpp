#pragma once
// What the worker core acts on, taken once from the worker's settings: its name and shard, the
// session's timers, the link measurement and how pushes are built. The coordinator's endpoint,
// the data files, keys and logging stay with the daemon.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config/settings.hpp"

namespace tern::proto {
class ProbeFiller;
}  // namespace tern::proto

namespace tern::worker {

// What the push builder must know of the configured compressor beyond its interface.
enum class CountKind {
  fixed,   // the level is the count sent (or there is no level)
  random,  // stochastic sparsification: a random count near the level
};

// The configured compressor as the worker acts on it, decided once from its kind.
struct PushStrategy {
  CountKind count_kind = CountKind::fixed;
  bool error_feedback = true;  // as configured (auto: on for the biased compressors)
  bool threshold = false;      // the hard threshold: a count that follows the data
};
// error_feedback_auto: on for the biased compressors (topk, threshold, sq, fp16), off for the
// unbiased ones (randomk, stochastic, qsgd) and for identity (nothing is left behind); else
// `error_feedback` as given.
PushStrategy pushStrategy(compression::CompressorKind kind, bool error_feedback_auto,
                          bool error_feedback);

// How pushes are built: the compressor, its strategy and the tuner's terms.
struct PushOptions {
  compression::CompressorSpec compressor;
  PushStrategy strategy;
  config::TuningSettings tuning;
  uint32_t packet_bytes = 1448;  // the link's packet size, for the packet cost model
  // Where error feedback builds the corrected gradient: shared by workers that never build
  // pushes at the same time (the simulator's); null = each worker its own.
  std::shared_ptr<std::vector<float>> corrected_scratch;
};

struct WorkerOptions {
  std::string name;
  size_t shard_index = 0;
  size_t shard_total = 1;
  size_t max_message_bytes = 0;  // the largest message this worker accepts
  double heartbeat_seconds = 1.0;
  double coordinator_patience_seconds = 1.0;
  config::LinkSettings link;
  PushOptions push;
  // Where probes take their filler bytes: shared by workers that never build probes at the
  // same time (the simulator's); null = each worker its own.
  std::shared_ptr<proto::ProbeFiller> probe_filler;
};

// The core's options from the validated settings (the compressor's name parsed here, once).
WorkerOptions workerOptions(const config::WorkerSettings& s);

}  // namespace tern::worker
