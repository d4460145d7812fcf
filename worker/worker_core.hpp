#pragma once
// The worker as a sans-I/O state machine. Every event takes `now` and returns its effects: the
// messages to send and, when a round starts, a gradient request the driver fulfils with a Trainer
// and answers with onGradient. Per round it applies the broadcast update to its replica
// (bit-identical with the coordinator's model), takes the gradient, and its PushBuilder adds the
// residual, picks the level under the coordinator's cap and compresses. Push-to-ack times feed
// its link model. The pieces: Session, Replica, PushBuilder, LinkMonitor (docs/architecture.md).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "common/util/rng.hpp"
#include "proto/message.hpp"
#include "worker/link_monitor.hpp"
#include "worker/link_report.hpp"
#include "worker/local_data.hpp"
#include "worker/push_builder.hpp"
#include "worker/replica.hpp"
#include "worker/session.hpp"
#include "worker/trainer.hpp"
#include "worker/welcome_terms.hpp"
#include "worker/worker_options.hpp"
#include "worker/worker_stats.hpp"

namespace tern::worker {

// What an event asks of the driver.
struct Effects {
  std::vector<Message> send;               // in order; each handed to the socket, then onSent
  std::optional<GradientRequest> compute;  // answer with onGradient (or drop it on a stop)
  double wake_at = 0.0;                    // call onTick then (nextWakeup())
};

class WorkerCore {
 public:
  // `instance` identifies this worker process to the coordinator (random per process in the
  // daemon; 0 = not given, which leaves a name unguarded against a second process). The shard
  // is read for the join and the welcome's checks; gradients are the Trainer's.
  WorkerCore(const WorkerOptions& options, std::shared_ptr<const ml::Dataset> shard,
             uint64_t instance = 0);
  // A worker whose data are described by `data` (an external trainer's: docs/python.md).
  WorkerCore(const WorkerOptions& options, LocalData data, uint64_t instance = 0);
  ~WorkerCore();

  // The partition the shard was cut from (ml::partitionFingerprint), said in every join so that
  // the coordinator refuses a worker whose shard settings differ from its fellows'. Before start().
  void setPartition(uint64_t fingerprint) { partition_fingerprint_ = fingerprint; }
  Effects start(double now);
  Effects onMessage(const Message& msg, size_t wire_bytes, double now);
  // The answer to the outstanding gradient request: the push (led by a probe) to send. An answer
  // to a request no longer outstanding (a re-join since, a stop) is dropped. A failed answer (the
  // trainer's failure, a gradient of another size, a non-finite one from an external trainer)
  // sits the round out: a push saying why and carrying nothing (Push.failure), the failure
  // counted and kept (lastTrainerError).
  Effects onGradient(const GradientResult& result, double now);
  // The driver handed `msg` (of wire_bytes) to the socket now: starts its transmission timer.
  void onSent(const Message& msg, size_t wire_bytes, double now);
  Effects onTick(double now);
  double nextWakeup() const { return session_.nextWakeup(); }
  // A gradient request is outstanding.
  bool computing() const { return pending_.has_value(); }

  // The transport's connection to the coordinator completed its handshake. A join refused
  // earlier is asked again within a second: a new connection is likely a restarted coordinator.
  void connectionUp(double now) { session_.connectionUp(now, instance_); }
  // What this worker sends when it stops: a Leave while it is joined (once), so that the
  // coordinator re-plans at once. Any gradient request is abandoned, and nothing new starts (no
  // gradient, no re-join): a welcome still awaited may be taken, and stop() asked again.
  std::vector<Message> stop(const std::string& reason, double now);
  // A message that arrives after stop(), while the daemon waits for the answer to its Leave:
  // the Leave's ack, the Finish or an error refusing the Leave end the wait; a push's ack is
  // timed and a round start's update goes into the replica. Nothing is sent.
  std::vector<Message> afterStop(const Message& msg, size_t wire_bytes, double now);

  bool finished() const { return finished_; }
  // Why this worker gave up (its shard cannot train the coordinator's model), or "".
  const std::string& fatalError() const { return fatal_; }
  bool joined() const { return session_.joined(); }
  // Why the last welcome was refused as one this shard cannot train under (empty if it was not).
  const std::string& unfitWelcome() const { return session_.unfitWelcome(); }
  // Why the coordinator did not admit this worker the last time it asked; "" once welcomed.
  const std::string& joinRefusal() const { return session_.refusal(); }
  // How long the coordinator may stay silent before this worker re-joins.
  double silenceAllowed() const { return session_.silenceAllowed(); }
  double heartbeatInterval() const { return session_.heartbeatInterval(); }
  // A join has gone out and no welcome has answered it yet.
  bool awaitingWelcome() const { return !finished_ && session_.awaitingWelcome(); }
  // A Leave went out to a coordinator that answers Leaves and its answer has not come.
  bool leaveUnanswered() const { return session_.leaveUnanswered(); }
  uint32_t id() const { return session_.address().worker_id; }
  // The coordinator's cap on T as last said (0 before the first Welcome).
  uint32_t cap() const { return cap_; }
  uint64_t session() const { return session_.address().session; }
  uint64_t replicaRound() const { return replica_.round(); }
  const std::vector<float>& parameters() const { return replica_.params(); }
  const WorkerStats& stats() const { return stats_; }
  const LinkMonitor& link() const { return link_; }
  // The round deadline the last welcome said (0 before one, or when it said none).
  double roundDeadline() const { return push_ ? push_->deadline().value_or(0.0) : 0.0; }
  // The error-feedback residual (empty before the first push or with feedback off).
  const std::vector<float>& residual() const;

 private:
  Effects effects(std::vector<Message> send = {});
  Message sendable(Message m, double now);
  std::vector<Message> join(double now);
  Effects handleWelcome(const Message& msg, double now);
  Effects refuseWelcome(const wire::Welcome& w, const WelcomeRefusal& r, double now);
  void takeWelcome(const wire::Welcome& w, std::shared_ptr<ml::Model> model,
                   std::vector<float> params, std::unique_ptr<PushBuilder> push);
  Effects handleRoundStart(const Message& msg, double now);
  void takeRoundSettings(const wire::RoundStart& rs);
  Effects handleAck(const wire::Ack& a, double now);
  Effects handleFinish(const Message& msg, double now);
  Effects handleError(const wire::Error& e, double now);
  // A join refusal (no room, another partition, the name taken): asked again after `wait`.
  Effects joinRefused(const std::string& what, const wire::Error& e, double wait, double now);
  std::vector<Message> refuse(const std::string& why);
  // The next queued probe, if nothing is waiting for an ack (see LinkMonitor).
  std::vector<Message> nextProbe(double now);

  // Why `result` cannot be pushed ("" when it can).
  std::string resultProblem(const GradientResult& result) const;
  Effects sitOut(uint64_t round, const std::string& why, double now);

  WorkerOptions options_;
  LocalData data_;
  uint64_t instance_ = 0;
  std::optional<uint64_t> partition_fingerprint_;
  Session session_;
  Replica replica_;
  LinkMonitor link_;
  LinkReport link_report_;                  // which pushes carry the link model
  std::shared_ptr<const ml::Model> model_;  // the welcome's (null before one)
  std::unique_ptr<PushBuilder> push_;       // null before a welcome
  TrainingPlan plan_;
  Rng rng_;  // the compressor's randomness
  uint32_t cap_ = 0;
  std::optional<uint64_t> peer_max_bytes_;  // the welcome's max_message_bytes
  std::optional<uint64_t> pushed_round_;    // the round of the last gradient push
  // The gradient request outstanding: its id, round, when it was asked, and whether the round
  // was asked for again.
  struct Pending {
    uint64_t id, round;
    double asked_at;
    bool again;
  };
  std::optional<Pending> pending_;
  // A failed attempt at `round`'s gradient: the next request for it draws other minibatches.
  void noteFailed(uint64_t round);
  uint64_t failed_round_ = UINT64_MAX;  // the round whose gradient last failed (none: max)
  uint32_t failed_attempts_ = 0;        // and how many times in a row
  uint64_t requests_ = 0;
  bool stopping_ = false;  // stop() was called
  bool left_ = false;      // a Leave went out
  bool finished_ = false;
  std::string fatal_;
  WorkerStats stats_;
};

}  // namespace tern::worker
