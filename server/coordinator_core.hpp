#pragma once
// The coordinator as a sans-I/O state machine. Every event (a message from a peer, a timeout, an
// evaluation's answer, a stop) takes `now` and returns its Effects: the messages to send, the
// rounds it closed, whether a checkpoint is due, and an evaluation for the driver to compute. It
// never touches a socket or a clock and never calls back: the daemon, the simulator and the
// tests drive the same code. Per round: collect pushes until every member answered or the
// deadline passed with the quorum, aggregate sum_i p_i C_i(g_i) renormalised over those who
// pushed, step the optimizer, and broadcast the exact fp32 update.
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/ml/model.hpp"
#include "coordinator_messages.hpp"
#include "server/aggregator.hpp"
#include "server/cap_planner.hpp"
#include "server/checkpoint_codec.hpp"
#include "server/coordinator_options.hpp"
#include "server/federated_evaluation.hpp"
#include "server/membership.hpp"
#include "server/quorum_tally.hpp"
#include "server/round_phase.hpp"
#include "server/round_record.hpp"
#include "server/straggler_bench.hpp"
#include "server/wake_queue.hpp"

namespace tern::server {

// The test-set accuracy of `parameters` (model_{round}), which the driver computes (on any
// thread) and answers with CoordinatorCore::handleEvaluated.
struct EvaluationRequest {
  uint64_t round = 0;  // the rounds closed so far
  std::shared_ptr<const std::vector<float>> parameters;
};

// What an event asks of the driver, in this order: write the closed rounds' rows, write the
// checkpoint if due, then send the messages; run the evaluation if asked.
struct Effects {
  std::vector<Outgoing> messages;
  std::vector<RoundRecord> closed_rounds;
  bool checkpoint_due = false;  // checkpoint(now) before sending `messages`
  std::optional<EvaluationRequest> evaluate;
  void append(Effects&& more);
};

// Sets an ack's hold time to now - received_at (never negative); other messages are left alone.
// A daemon that does more work before the send stamps it again right before the socket.
void stampAckHold(Message& m, double received_at, double now);

class CoordinatorCore {
 public:
  // evaluates: a test set is there, so rounds on the eval_every schedule ask for an evaluation.
  CoordinatorCore(const CoordinatorOptions& options, std::unique_ptr<ml::Model> model,
                  bool evaluates, uint64_t session, double now);
  // A core resumed from a checkpoint's state under a new `session`: known workers keep their ids
  // and counters but are not alive until they re-join (and get the full model).
  CoordinatorCore(const CoordinatorOptions& options, std::unique_ptr<ml::Model> model,
                  bool evaluates, uint64_t session, CheckpointState restored, double now);
  // decodeCheckpoint then the constructor above; throws std::runtime_error on damaged bytes.
  static std::unique_ptr<CoordinatorCore> restore(const CoordinatorOptions& options,
                                                  std::unique_ptr<ml::Model> model, bool evaluates,
                                                  uint64_t session,
                                                  const std::string& checkpoint_bytes, double now);

  // A message from `peer` (its ROUTER identity), wire_bytes its frames' size, received at
  // received_at (an ack's hold runs from then to now).
  Effects handleMessage(const std::string& peer, const Message& msg, size_t wire_bytes,
                        double received_at, double now);
  // A message that did not parse: counted and answered with an error.
  Effects handleMalformed(const std::string& peer, const std::string& reason, double now);
  // A join the daemon refused before the core (its CURVE key may not use the name, or joins too
  // fast): counted under refusal.reason and answered.
  Effects refuseJoin(const std::string& peer, const JoinRefusal& refusal, double now);
  // Timers: round deadline, heartbeats, worker patience, the resume grace.
  Effects handleTimeout(double now);
  // The answer to the last EvaluationRequest: completes its round and starts the next.
  Effects handleEvaluated(double accuracy, double now);
  // Ends training now (a signal): every worker is told to finish.
  Effects handleStop(double now);
  // The next time handleTimeout has work to do; O(log N) per worker changed since the last call
  // (each worker's wake-up is kept in a heap), O(N) after a round starts or closes.
  double nextTimeout(double now) const;
  // The same, by visiting every worker: the reference nextTimeout is held to in the tests.
  double nextTimeoutByWalk(double now) const;
  // The state at the start of the round being collected (its pushes are redone on resume).
  std::string checkpoint(double now) const;

  Phase phase() const { return phase_.get(); }
  bool finished() const { return phase_.is(Phase::kDone); }
  // Every worker told to finish that answers a Finish has sent its Leave.
  bool finishAcknowledged() const { return finish_unacked_.empty(); }
  size_t finishUnacknowledged() const { return finish_unacked_.size(); }
  uint64_t round() const { return round_; }
  uint64_t session() const { return session_; }
  const ml::Model& model() const { return *model_; }
  const std::vector<float>& parameters() const { return aggregator_.parameters(); }
  // The last evaluation's test accuracy (0 before the first).
  double lastAccuracy() const { return last_accuracy_.value_or(0.0); }
  // The last evaluation's test accuracy; none before the first (or without test data).
  std::optional<double> accuracy() const { return last_accuracy_; }
  const RoundRecord& lastRecord() const { return last_record_; }
  // The last round's federated evaluation (none before one).
  const std::optional<FederatedEvaluation>& lastFederated() const { return last_federated_; }
  const Counters& counters() const { return counters_; }
  const std::map<std::string, uint64_t>& rejections() const { return counters_.rejections; }
  uint64_t rejectedTotal() const { return counters_.rejectedTotal(); }
  uint64_t reasked() const { return counters_.pushes_asked_again; }
  uint64_t badReports() const { return counters_.push_reports_unusable; }
  uint64_t stepsRefused() const { return counters_.steps_refused; }
  uint64_t pushesClipped() const { return counters_.pushes_clipped; }
  uint64_t benchedTotal() const { return counters_.benched; }
  uint64_t uploadBytes() const { return counters_.upload_bytes; }
  uint64_t downloadBytes() const { return counters_.download_bytes; }
  uint64_t fullBytes() const { return counters_.full_bytes; }
  size_t aliveWorkers() const { return membership_.alive(); }
  static constexpr uint64_t kMaxSamplesPerWorker = Membership::kMaxSamplesPerWorker;
  // A worker gone this long (or 10 worker patiences, if longer) is forgotten.
  static constexpr double kForgetGoneAfterSeconds = 600.0;
  double forgetAfterSeconds() const {
    return std::max(kForgetGoneAfterSeconds, 10.0 * options_.worker_patience_seconds);
  }
  static constexpr double kReplanPushBytesChange = CapPlanner::kReplanPushBytesChange;
  static constexpr double kReplanLinkChange = CapPlanner::kReplanLinkChange;

 private:
  Effects take();
  void handleJoin(const std::string& peer, const wire::Join& join);
  void handleLeave(Worker& w, const wire::Leave& leave);
  void handlePush(const std::string& peer, const Message& msg, size_t wire_bytes,
                  double received_at);
  void handleFinished(const std::string& peer, const wire::Envelope& env);
  // A reported link model, planned with from here on unless no link could have it.
  void takeLink(Worker& w, const wire::LinkModel& link, bool from_push);
  // Refuses a push for a round other than the open one, or one the worker holds no seat in.
  void refuseOffRound(Worker& w, uint64_t push_round, double received_at);
  void acceptPush(Worker& w, const Message& msg, size_t wire_bytes, double received_at,
                  compression::DecodeResult decoded);
  Message welcomeFor(const Worker& w, const wire::Join& join);
  Message roundStartFor(const Worker& w) const;
  void maybeStart();
  void markSilentGone();
  void roundTimers();
  // Counts a refusal and answers it; `about` names the push it refuses.
  void reject(const std::string& peer, wire::Error::Code code, const std::string& reason,
              const std::string& text, std::optional<proto::ErrorAbout> about = {});
  void refusePush(Worker& w, wire::Error::Code code, const std::string& reason,
                  const std::string& text);
  void send(Worker& w, Message m);
  void sendRoundStart(Worker& w);
  void admitSittingOut();
  // A round that reached its deadline with too little pushed brings the benched members back.
  void recallBenched();
  void startRound();
  void closeRound();
  // The run's totals and the worker table as of now, into a round's record.
  void recordTotals(RoundRecord& rec) const;
  void completeRound(RoundRecord rec, bool last);
  void finishAll();
  // The quorum tally, recounted if stale; tallyStale after any change to who is awaited.
  const QuorumTally& tally() const;
  void tallyStale() { tally_.reset(); }
  bool allPushed() const;
  bool allAnswered() const;
  double pushedShare() const;
  PatienceContext patience() const;
  // nextTimeout's part that is not any one worker's: heartbeats, the round's deadline, resuming.
  double sharedTimeout(double now) const;
  // When `w` (alive) is next due: marked gone, or sent a heartbeat.
  double wakeupOf(const Worker& w, const PatienceContext& context) const;
  // `id`'s wake-up may have moved: it is recomputed at the next nextTimeout (a driver that asks
  // seldom gets one rebuild instead of an ever longer list).
  void wakeMoved(uint32_t id) {
    if (wakes_stale_) return;
    wake_moved_.push_back(id);
    if (wake_moved_.size() > 2 * membership_.all().size() + 64) wakesStale();
  }
  // Every wake-up may have moved (a round started or closed).
  void wakesStale() {
    wakes_stale_ = true;
    wake_moved_.clear();
  }
  // Brings wakes_ up to date with the table.
  void refreshWakes() const;

  CoordinatorOptions options_;
  std::unique_ptr<ml::Model> model_;
  bool evaluates_;
  uint64_t session_;
  Membership membership_;
  CapPlanner planner_;
  Aggregator aggregator_;
  StragglerBench bench_;
  RoundPhase phase_;
  Counters counters_;
  uint64_t round_ = 0;  // the round being collected
  double round_deadline_ = 0.0;
  double housekeeping_at_ = 0.0;      // handleTimeout is due by then at the latest
  std::optional<double> start_time_;  // when training (time_s 0) began, once it has
  double resumed_elapsed_ = 0.0;      // time_s the restored checkpoint had reached
  std::set<uint32_t> told_to_finish_, finish_unacked_;
  std::optional<double> last_accuracy_;
  std::optional<FederatedEvaluation> last_federated_;
  RoundRecord last_record_;
  std::optional<RoundRecord> evaluating_;  // the closed round awaiting its evaluation
  bool evaluating_last_ = false;
  double now_ = 0.0;                          // the time of the event being handled
  Effects out_;                               // what the event being handled returns
  mutable std::optional<QuorumTally> tally_;  // kept by pushes and refusals, else recounted
  mutable WakeQueue wakes_;                   // alive workers' wake-ups (wakeupOf)
  mutable std::vector<uint32_t> wake_moved_;  // workers whose wake-up may have moved since
  mutable bool wakes_stale_ = true;           // wakes_ is rebuilt from the table at next use
  mutable std::optional<PatienceContext> wakes_context_;  // what wakes_ was computed under
};

}  // namespace tern::server
