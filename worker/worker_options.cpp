#include "worker/worker_options.hpp"

#include <stdexcept>

namespace tern::worker {

PushStrategy pushStrategy(compression::CompressorKind kind, bool error_feedback_auto,
                          bool error_feedback) {
  using compression::CompressorKind;
  const bool unbiased = kind == CompressorKind::kRandomK || kind == CompressorKind::kStochastic ||
                        kind == CompressorKind::kQsgd;
  // Identity sends every value as it is: its residual would stay zero, at two passes over the
  // model and a copy of each push kept for a take-back.
  const bool exact = kind == CompressorKind::kIdentity;
  PushStrategy s;
  s.count_kind = kind == CompressorKind::kStochastic ? CountKind::random : CountKind::fixed;
  s.error_feedback = error_feedback_auto ? !(unbiased || exact) : error_feedback;
  s.threshold = kind == CompressorKind::kThreshold;
  return s;
}

WorkerOptions workerOptions(const config::WorkerSettings& s) {
  const auto kind = compression::compressorKindNamed(s.compressor.name);
  if (!kind) throw std::invalid_argument("unknown compressor '" + s.compressor.name + "'");
  WorkerOptions o;
  o.name = s.name;
  o.shard_index = s.shard_index;
  o.shard_total = s.shard_total;
  o.max_message_bytes = s.max_message_bytes;
  o.heartbeat_seconds = s.heartbeat_seconds;
  o.coordinator_patience_seconds = s.coordinator_patience_seconds;
  o.link = s.link;
  o.push.compressor = s.compressor;
  o.push.strategy = pushStrategy(*kind, s.error_feedback_auto, s.error_feedback);
  o.push.tuning = s.tuning;
  o.push.packet_bytes = s.link.packet_bytes;
  return o;
}

}  // namespace tern::worker
