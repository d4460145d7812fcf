#pragma once
// Builds a worker's gradient push: error feedback (the residual), the level the tuner picks under
// the coordinator's cap, cut to what fits the coordinator's largest message and to what the
// fitted link carries within the round's deadline, and the compressed payload. It owns the
// residual and what the last pushes carried (a push refused as late is taken back into it).
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/compression/error_feedback.hpp"
#include "common/util/rng.hpp"
#include "proto/message.hpp"
#include "worker/level_policy.hpp"
#include "worker/link_monitor.hpp"
#include "worker/worker_options.hpp"
#include "worker/worker_stats.hpp"

namespace tern::worker {

// The largest level in [1, dim] whose push stays within `max_bytes` by the codec's bound; 0 when
// not even one coordinate does.
uint32_t largestFittingLevel(const compression::Compressor& c, CountKind kind, uint32_t dim,
                             uint64_t max_bytes);

class PushBuilder {
 public:
  // Throws when the compressor or the tuner cannot be made. smoothness: the shard's bound L
  // (nullopt: the model gives none, and L = 1 stands in).
  PushBuilder(const PushOptions& options, double threshold, std::optional<double> smoothness);

  // The pushes of `dim` coordinates are held to `max_bytes` (the coordinator's largest message):
  // returns the largest level that fits (0: none does).
  uint32_t limitTo(uint64_t max_bytes, uint32_t dim);
  // The largest push of `dim` coordinates: every coordinate, or one short of it (an index section).
  size_t largestPush(uint32_t dim);
  void keepFitOf(const PushBuilder& previous) { policy_.keepFitOf(previous.policy_); }
  void setDeadline(std::optional<double> seconds) { round_deadline_ = seconds; }
  std::optional<double> deadline() const { return round_deadline_; }  // the welcome's
  // A round starts at `now`: its deadline left (nullopt: the welcome's) and the coordinator's
  // learning rate (nullopt: not a step, the paper's is priced).
  void roundStarts(double now, std::optional<double> deadline_left,
                   std::optional<double> learning_rate);
  // A round start's threshold (> 0): a new one starts a new residual. Throws if it is bad.
  void setThreshold(double threshold);
  bool errorFeedback() const { return options_.strategy.error_feedback; }
  const std::vector<float>& residual() const { return compressor_->residual(); }
  // The push of `round` was refused: its content goes back into the residual.
  void takeBack(uint64_t round, WorkerStats& stats);

  struct Built {
    bool computed = true;  // false: not finite; the push says so (NaN loss, no payload)
    bool probe_ok = true;  // false: a probe going ahead would make the push late
  };
  // Fills `m` (a push from pushMessage) from the gradient: again = the coordinator asked for this
  // round once more. compute_seconds: the time the gradient took.
  Built build(Message& m, std::span<const float> grad, double loss, bool again, uint32_t cap,
              LinkMonitor& link, double now, double compute_seconds, Rng& rng, WorkerStats& stats);

 private:
  struct InTime;
  // The vector to compress: the gradient plus the residual (or, asked again, the residual alone
  // once the refused push is back in it); nullopt, nothing changed, when grad is not finite.
  std::optional<std::span<const float>> corrected(std::span<const float> grad, uint64_t round,
                                                  bool again, WorkerStats& stats);
  InTime inTime(uint32_t most, size_t overhead_bytes, uint32_t dim, LinkMonitor& link, double now);
  // Counts (and now and then says) a push trimmed to the message limit or held to the deadline.
  void reportDeadline(uint64_t round, const InTime& t, uint32_t most, uint32_t level,
                      size_t overhead, uint32_t dim, WorkerStats& stats);
  struct Predicted {
    double cost, improvement, step;
  };
  static void setReport(wire::Push& p, double loss, double compute_seconds, uint32_t level,
                        const Predicted& predicted);
  void remember(uint64_t round, compression::SparseGradient carried);

  PushOptions options_;
  std::optional<double> smoothness_;
  std::unique_ptr<compression::ErrorFeedback> compressor_;
  LevelPolicy policy_;
  double threshold_;
  std::optional<uint32_t> size_cap_;      // the largest level that fits the peer's message
  std::optional<double> round_deadline_;  // the welcome's round_deadline_seconds
  std::optional<double> deadline_left_;   // the round start's deadline_seconds_left
  double round_started_at_ = 0.0;         // when the round being pushed started here
  std::optional<double> step_;            // the coordinator's step for this round, if priced
  // What the last two gradient pushes carried, by round, until they are known applied or not:
  // a push refused as late arrives back after the next push was made.
  std::deque<std::pair<uint64_t, compression::SparseGradient>> sent_;
};

}  // namespace tern::worker
