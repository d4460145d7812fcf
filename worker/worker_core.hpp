#pragma once
// The worker as a sans-I/O state machine. Events: start, a message from the coordinator, a push
// handed to the socket, a tick. Actions: messages to send. Per round it applies the broadcast
// update to its replica (bit-identical with the coordinator's model), computes a minibatch
// gradient on its shard, adds its error-feedback residual, lets the tuner pick the level under
// the coordinator's cap, compresses and pushes. Push-to-ack times feed its link model.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/compression/error_feedback.hpp"
#include "common/config/settings.hpp"
#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "common/util/rng.hpp"
#include "message.hpp"
#include "worker/level_policy.hpp"
#include "worker/link_monitor.hpp"

namespace tern::worker {

using Clock = std::function<double()>;

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
  uint64_t trimmed = 0;  // threshold pushes cut to the largest that fit the coordinator's limit
  // Pushes cut below the cap (or the threshold's count) so that the fitted link carries them
  // within the round's deadline.
  uint64_t deadline_trimmed = 0;
  // Pushes of a compressor without a level that the fitted link carries past the deadline.
  uint64_t deadline_late = 0;
  uint32_t last_level = 0;
  double last_predicted_cost = 0.0;  // the tuner's prediction for the last push
  double last_predicted_improvement = 0.0;
  double last_step = 0.0;  // the step that prediction assumes
  double last_loss = 0.0;
  double data_share = 0.0;  // p_i, as the coordinator last said
};

class WorkerCore {
 public:
  // `instance` identifies this worker process to the coordinator (random per process in the
  // daemon; 0 = not given, which leaves a name unguarded against a second process).
  WorkerCore(const config::WorkerSettings& settings, std::shared_ptr<const ml::Dataset> shard,
             Clock clock, uint64_t instance = 0);
  ~WorkerCore();

  // The partition the shard was cut from (ml::partitionFingerprint), said in every join so that
  // the coordinator refuses a worker whose shard settings differ from its fellows'. Before start().
  void setPartition(uint64_t fingerprint) { partition_fingerprint_ = fingerprint; }
  // Asked before a gradient and between its chunks and local steps: true leaves the round's
  // gradient unfinished and sends nothing for it (the daemon is stopping and leaves next), so that
  // a stop during a long computation is not held back until it ends. The daemon's stop flag; none
  // in the simulator. It may be called from the thread computing the gradient.
  void setStopCheck(std::function<bool()> stop_check) { stop_check_ = std::move(stop_check); }
  std::vector<Message> start();
  std::vector<Message> onMessage(const Message& msg, size_t wire_bytes);
  // The daemon handed `msg` (of wire_bytes) to the socket now: starts its transmission timer.
  void onSent(const Message& msg, size_t wire_bytes);
  std::vector<Message> onTick();
  // The heartbeat onTick sends when it is due (nullopt before a welcome). The daemon builds one
  // before a long computation and sends it from its own thread meanwhile: it reads nothing the
  // computation changes.
  std::optional<Message> heartbeat() const;
  double nextWakeup() const;

  bool finished() const { return finished_; }
  // Why this worker gave up (its shard cannot train the coordinator's model), or "".
  const std::string& fatalError() const { return fatal_; }
  bool joined() const { return joined_; }
  // The transport's connection to the coordinator completed its handshake. A join refused
  // earlier (a model that did not fit, no room, another partition) is asked again within a
  // second: a new connection is likely a restarted, perhaps mended, coordinator.
  void connectionUp();
  // Why the last welcome was refused as one this shard cannot train under (empty if it was not):
  // the worker asks again later.
  const std::string& unfitWelcome() const { return unfit_welcome_; }
  // How long the coordinator may stay silent before this worker re-joins: the patience, longer
  // after silences over a live connection (see onTick).
  double silenceAllowed() const;
  // How often this worker heartbeats: its heartbeat_seconds, or a third of the coordinator's
  // worker patience if that is shorter (said in the welcome).
  double heartbeatInterval() const { return heartbeat_; }
  // A join has gone out and no welcome has answered it yet: the coordinator may be admitting this
  // worker (a stopping daemon waits a little for the welcome, so that it can leave).
  bool awaitingWelcome() const {
    return !joined_ && !finished_ && !join_refused_ && join_sent_ >= 0.0;
  }
  // What this worker sends when it stops: a Leave while it is joined, so that the coordinator
  // re-plans at once instead of waiting out its patience; nothing before a welcome or after the
  // finish.
  std::vector<Message> stop(const std::string& reason);
  // A message that arrives after stop(), while the daemon waits for the answer to its Leave:
  // the Leave's ack, the Finish (its last update goes into the replica) or an error that refuses
  // the Leave end the wait; a push's ack is timed and a round start's update goes into the
  // replica. Nothing new starts (no gradient, no re-join) and nothing is sent.
  std::vector<Message> afterStop(const Message& msg, size_t wire_bytes);
  // A Leave went out to a coordinator that answers Leaves (Welcome.acks_leave) and its answer has
  // not come: what the worker sent may still be crossing, and closing the connection now could
  // cut it off.
  bool leaveUnanswered() const { return leave_unanswered_; }
  uint32_t id() const { return id_; }
  // The coordinator's cap on T as last said (0 before the first Welcome).
  uint32_t cap() const { return cap_; }
  uint64_t session() const { return session_; }
  uint64_t replicaRound() const { return replica_round_; }
  const std::vector<float>& parameters() const { return params_; }
  const WorkerStats& stats() const { return stats_; }
  const LinkMonitor& link() const { return *link_; }
  // The error-feedback residual (empty before the first push or with feedback off).
  const std::vector<float>& residual() const;

 private:
  std::vector<Message> join();
  std::vector<Message> handleWelcome(const Message& msg);
  std::vector<Message> handleRoundStart(const Message& msg);
  // Clears leaveUnanswered() when `env` answers the Leave (see afterStop).
  void noteLeaveAnswer(const wire::Envelope& env);
  // The model part of a round start: the full model, or the update taken into the replica.
  enum class Sync { done, rejoin, refused };
  Sync takeRoundModel(const Message& msg, std::string& error);
  // again: the coordinator asked for this round once more; its last push was never applied.
  struct Push {
    Message message;
    // false: the gradient could not be computed or compressed (not finite); the message says
    // so with a non-finite loss and no payload, and the residual is as it was.
    bool computed = true;
    // true: the stop check said stop while the gradient was computed; there is no message.
    bool stopped = false;
    // false: a probe going ahead would make the push late (the deadline budget did not count one).
    bool probe_ok = true;
  };
  Push makePush(uint64_t round, bool again);
  // An empty push (probe or gradient) for `round`, addressed from this worker's session.
  Message pushFor(uint64_t round) const;
  // The push of `round` was refused as late: its content goes back into the residual.
  void takeBack(uint64_t round);
  Message sendable(Message m);
  // A Leave for the worker id and session given, saying why.
  Message leaveMessage(uint32_t id, uint64_t session, const std::string& reason);
  // false: the stop check said stop before the gradient was complete (grad is then partial).
  bool computeGradient(uint64_t round, std::vector<float>& grad, double& loss, uint64_t& used);
  // The mean loss of `rows` at `at` (its gradient in grad), in chunks of ml::chunkRows() rows (a
  // stop is seen between them, and one chunk's rows and activations are held at a time); nullopt
  // when the stop check said stop.
  std::optional<double> batchGradient(std::span<const float> at, std::span<const size_t> rows,
                                      std::vector<float>& grad);
  // The stop check said stop (false without one).
  bool stopping() const;
  std::vector<Message> refuse(const std::string& why);
  bool errorFeedbackOn() const;
  // The next queued probe, if nothing is waiting for an ack (see LinkMonitor).
  std::vector<Message> nextProbe();
  // What the fitted link carries of a push within the round's deadline.
  struct InTime {
    uint32_t level = 0;  // the largest level that arrives in time, at most `most` (at least 1)
    bool bound = false;  // a push at `most` would not: level is below it (or cannot be, if the
                         // compressor has no level)
    double seconds_at_most = 0.0;  // a push at `most` on the fitted link
    double left = 0.0;             // seconds left of the deadline
    double budget = 0.0;           // the seconds the push has of them
    bool probe_ahead = false;      // the budget counts a probe going ahead of the push
    double a = 0.0, b = 0.0, packet_bytes = 1.0;  // the fit it priced with
    // A message of wire_bytes on the fitted link.
    double seconds(double wire_bytes) const;
  };
  // The largest level (at most `most`) whose push, with the probe that goes ahead of it, the fitted
  // link carries within the round's deadline; `most` when no deadline was said or no link is
  // fitted. overhead_bytes: the push's bytes besides the codec's.
  InTime inTime(uint32_t most, size_t overhead_bytes);
  // Warns, on the first such push and every 100th (count), that `what` was held to the deadline.
  void sayInTime(uint64_t round, const InTime& t, const std::string& what, double seconds,
                 const std::string& done, uint64_t count);
  // Decodes the coordinator's update strictly and adds it to the replica.
  bool applyUpdate(std::span<const uint8_t> payload, std::string& error);
  // The same into `params`.
  bool applyUpdateTo(std::span<const uint8_t> payload, std::vector<float>& params,
                     std::string& error) const;

  config::WorkerSettings settings_;
  std::shared_ptr<const ml::Dataset> shard_;
  ml::Dataset batch_;  // the minibatch (or a chunk of it), gathered into the same storage
  std::vector<float> chunk_grad_;  // one chunk's gradient, for batches of several chunks
  std::function<bool()> stop_check_;
  Clock clock_;
  std::unique_ptr<LinkMonitor> link_;

  bool joined_ = false;
  bool finished_ = false;
  std::string fatal_;
  uint32_t id_ = 0;
  uint64_t session_ = 0;
  uint64_t replica_round_ = 0;
  int64_t pushed_round_ = -1;  // the round of the last gradient push
  // What the last two gradient pushes carried, by round, until they are known applied or not:
  // a push refused as late arrives back after the next push was made.
  std::deque<std::pair<uint64_t, compression::SparseGradient>> sent_;
  uint32_t cap_ = 0;
  // The coordinator's max_message_bytes from the welcome (0 = not said), and the largest level
  // whose push fits in it.
  uint64_t peer_max_bytes_ = 0;
  uint32_t size_cap_ = UINT32_MAX;
  double threshold_ = 0.0;
  // The coordinator's round_deadline_seconds from the welcome (0 = not said), and when the round
  // being pushed started here (its round start was taken).
  double round_deadline_ = 0.0;
  double round_deadline_left_ = 0.0;  // the round start's deadline_seconds_left (0 = not said)
  double round_started_at_ = 0.0;
  // tern::checksum of the replica the last join named (0 = none).
  uint64_t announced_checksum_ = 0;
  bool acks_leave_ = false;        // the welcome said the coordinator answers Leaves
  bool leave_unanswered_ = false;  // see leaveUnanswered()
  // The coordinator's learning rate for the round being pushed (0 = not said: the paper's step).
  double step_ = 0.0;
  double smoothness_ = 1.0;        // the shard's L, as the tuner takes it
  bool smoothness_known_ = false;  // false: the model gives no bound (L = 1 stands in)
  wire::TrainingSettings training_;
  std::unique_ptr<ml::Model> model_;
  std::vector<float> params_;
  std::unique_ptr<compression::ErrorFeedback> compressor_;
  std::unique_ptr<LevelPolicy> policy_;
  Rng rng_;
  double last_heard_ = 0.0;
  // The heartbeat interval and the patience in use: the settings', fitted to the coordinator's
  // own at each welcome (fitTimersTo).
  double heartbeat_ = 0.0, patience_ = 0.0;
  void fitTimersTo(double coordinator_heartbeat, double coordinator_patience);
  uint32_t unfit_welcomes_ = 0;        // welcomes in a row whose model does not fit the shard
  std::string unfit_welcome_;          // why the last of them did not
  double silence_factor_ = 1.0;        // silenceAllowed() in units of the patience
  bool connected_since_join_ = false;  // a handshake completed since the last silent re-join
  double last_sent_ = 0.0;
  double join_sent_ = -1.0;
  uint64_t instance_ = 0;
  uint64_t partition_fingerprint_ = 0;  // 0 = not said
  bool join_refused_ = false;   // the last join was answered with a refusal: no welcome will come
  uint64_t join_nonce_ = 0;     // of the last join sent; a welcome answering another is stale
  double retry_join_at_ = 0.0;  // after NAME_TAKEN: when to ask again (0 = not waiting)
  WorkerStats stats_;
};

}  // namespace tern::worker
