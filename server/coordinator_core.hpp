#pragma once
// The coordinator as a sans-I/O state machine: it takes events (a message from a peer, a tick)
// and returns the messages to send. It never touches a socket or the wall clock: time comes from
// the injected clock, so the daemon, the simulator and the tests drive the same code.
// Per round: collect pushes until all active workers pushed or the deadline passed (with the
// quorum), aggregate sum_i p_i C_i(...) renormalised over those who pushed, step the optimizer,
// broadcast the exact fp32 update so every replica stays bit-identical.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/allocation/allocator.hpp"
#include "common/allocation/budget.hpp"
#include "common/allocation/link_costs.hpp"
#include "common/compression/compressor.hpp"
#include "common/config/settings.hpp"
#include "common/ml/model.hpp"
#include "common/ml/optimizer.hpp"
#include "message.hpp"

namespace tern::server {

using Clock = std::function<double()>;

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
  // What the worker's tuner reported with its push of the round (all zero until it has pushed,
  // and when the report was unusable): the level T it sent, the cost C(T) it predicted in its
  // cost model's unit, the improvement it predicted and the step that improvement assumes.
  uint32_t level = 0;
  double predicted_cost = 0.0;
  double predicted_improvement = 0.0;
  double predicted_step = 0.0;
};

// One row of the metrics CSV: counters are cumulative since the start of training.
struct RoundRecord {
  uint64_t round = 0;
  double time_s = 0.0;
  double train_loss = 0.0;
  double test_accuracy = 0.0;  // the last evaluation's (0 before the first)
  bool evaluated = false;      // evaluated at this round's close
  bool accuracy_measured =
      false;  // test_accuracy comes from an evaluation, this round's or one before
  uint64_t upload_bytes = 0;
  uint64_t download_bytes = 0;
  uint64_t full_bytes = 0;
  uint32_t participants = 0;
  uint64_t late_pushes = 0;
  uint64_t rejected = 0;
  std::vector<WorkerRecord> workers;  // every known worker, by id
};

// Sets an ack's hold time: from receiving the message it answers (received_at) to now. The
// worker subtracts it from the ack's round trip to get its link time, so it must cover all the
// coordinator did in between: the core stamps it when it returns, and a daemon that does more
// work before the send (checkpoint, logging) stamps it again right before handing it to the
// socket. Messages other than acks are left alone.
void stampAckHold(Message& m, double received_at, double now);

class CoordinatorCore {
 public:
  CoordinatorCore(const config::CoordinatorSettings& settings, std::unique_ptr<ml::Model> model,
                  std::shared_ptr<const ml::Dataset> test_data, uint64_t session, Clock clock);

  // A message from `peer` (its ROUTER identity); wire_bytes = the frames' total size.
  std::vector<Outgoing> onMessage(const std::string& peer, const Message& msg, size_t wire_bytes,
                                  double received_at);
  // A message that could not even be parsed: counted and answered with an error.
  std::vector<Outgoing> onMalformed(const std::string& peer, const std::string& reason);
  // Timers: round deadline, heartbeats, worker patience.
  std::vector<Outgoing> onTick();
  // The next time onTick() has work to do.
  double nextWakeup() const;
  // Ends training now (signal): every worker is told to finish.
  std::vector<Outgoing> stop();
  // Runs between two chunks of rows of a test-set evaluation (ml::chunkedAccuracy), which on a
  // large test set and a small board can take longer than the daemon's watchdog allows: the
  // daemon pings it there. chunk_rows 0 = ml::chunkRows of the model.
  void setBetweenChunks(std::function<void()> between, size_t chunk_rows = 0) {
    between_chunks_ = std::move(between);
    eval_chunk_rows_ = chunk_rows;
  }

  // Checkpoints (the daemon does the file I/O). checkpoint() serializes the state at the start of
  // the round being collected: model, optimizer velocity, round, membership, allocation, counters,
  // and what each worker's pushes were measured to cost (kept when the same process re-joins).
  // Pushes already received for that round are not included; the round is redone on resume.
  std::string checkpoint() const;
  // True when a round closed on a checkpoint boundary (settings.checkpoint.every) or training
  // finished; the daemon writes checkpoint() before sending the messages of that event, so no
  // worker ever sees a model that a restart could lose. checkpointWritten() clears it.
  bool checkpointDue() const { return checkpoint_due_; }
  void checkpointWritten() { checkpoint_due_ = false; }
  // A core that resumes from checkpoint bytes under a new `session`. Known workers keep their ids
  // and counters but are not alive until they re-join (their old session is refused, so they do
  // it on their own) and get the full model. Throws std::runtime_error if the bytes do not parse
  // or do not fit the configured model.
  static std::unique_ptr<CoordinatorCore> restore(const config::CoordinatorSettings& settings,
                                                  std::unique_ptr<ml::Model> model,
                                                  std::shared_ptr<const ml::Dataset> test_data,
                                                  uint64_t session, Clock clock,
                                                  const std::string& checkpoint_bytes);

  bool finished() const { return phase_ == Phase::kDone; }
  // Every worker told to finish that answers a Finish (its join said so) has answered with its
  // Leave (true when none was told): the daemon may exit without cutting off a Finish still on
  // its way. Meanwhile their other messages are answered SHUTTING_DOWN and not counted as
  // rejected (the run's record is closed).
  bool finishAcknowledged() const { return finish_unacked_.empty(); }
  size_t finishUnacknowledged() const { return finish_unacked_.size(); }
  uint64_t round() const { return round_; }
  uint64_t session() const { return session_; }
  const std::vector<float>& parameters() const { return params_; }
  double lastAccuracy() const { return last_accuracy_; }
  // The last evaluation's test accuracy; none before the first (or without test data).
  std::optional<double> accuracy() const {
    return accuracy_known_ ? std::optional<double>(last_accuracy_) : std::nullopt;
  }
  const RoundRecord& lastRecord() const { return last_record_; }
  const std::map<std::string, uint64_t>& rejections() const { return rejections_; }
  uint64_t rejectedTotal() const;
  // Round starts sent again to a worker whose push was refused.
  uint64_t reasked() const { return reasked_; }
  // Accepted pushes whose tuner report (level, predicted cost or improvement) was unusable: the
  // gradient is applied, the report recorded as zeros.
  uint64_t badReports() const { return bad_reports_; }
  // Rounds whose aggregated step would have made the model or the momentum non-finite (pushes
  // of huge finite values): not taken, the model and momentum kept.
  uint64_t stepsRefused() const { return steps_refused_; }
  // The most samples a worker may declare in its join: shares then never overflow.
  static constexpr uint64_t kMaxSamplesPerWorker = uint64_t{1} << 40;
  // A worker gone this long (or 10 worker patiences, if longer) is forgotten.
  static constexpr double kForgetGoneAfterSeconds = 600.0;
  // How long a gone worker is remembered: kForgetGoneAfterSeconds, or ten patiences if longer.
  double forgetAfterSeconds() const {
    return std::max(kForgetGoneAfterSeconds, 10.0 * settings_.worker_patience_seconds);
  }
  uint64_t uploadBytes() const { return upload_bytes_; }
  uint64_t fullBytes() const { return full_bytes_; }
  // A plan input that moved by more than this fraction since the last plan re-plans at the
  // round's close.
  static constexpr double kReplanPushBytesChange = 0.1;
  static constexpr double kReplanLinkChange = 0.25;
  size_t aliveWorkers() const;

  // Called with every closed round (metrics CSV, progress line).
  std::function<void(const RoundRecord&)> on_round;

 private:
  enum class Phase { kWaiting, kRunning, kDone };
  // What pushes cost on the wire: bytes besides their coordinates (envelope, frames, the codec's
  // header) and the index and value bytes per decoded coordinate, as running means over rounds
  // (stochastic compressors send a varying count).
  struct PushBytes {
    bool known = false;
    double fixed = 0.0;
    double per_coordinate = 0.0;
    void fold(double round_fixed, double round_per_coordinate);
  };
  // One accepted push's bytes, folded into the means when its round closes.
  struct PushSample {
    double fixed = 0.0;
    double coordinate_bytes = 0.0;
    double coordinates = 0.0;
  };
  struct Worker {
    WorkerRecord rec;
    std::string peer;
    uint64_t samples = 0;
    uint64_t instance = 0;     // the worker process holding the name (Join.instance; 0 = unknown)
    bool acks_finish = false;  // answers a Finish with a Leave (Join.acks_finish)
    double last_seen = 0.0;
    double last_sent = 0.0;
    int64_t synced_round = -1;  // the model round this worker's replica holds
    std::optional<compression::SparseGradient> pending;
    double loss = 0.0;
    bool refused = false;  // its push for this round was refused: asked again at the deadline
    double planned_seconds_per_packet = 0.0;  // its link's b when the caps were last planned
    // Under a cost-aware link-seconds budget with fitted links: what the last plan charged this
    // worker, per_unit seconds for every unit of its packing (0 = not planned in seconds).
    double planned_unit_seconds = 0.0;
    // The partition its shard was cut from, as its last join said (0 = not said).
    uint64_t partition_fingerprint = 0;
    uint32_t shard_index = 0;
    uint32_t shard_total = 0;
    allocation::Packing planned_packing;
    // Its own pushes' costs (its compressor's), kept over re-joins, and the price its cap was
    // last planned at (its own, or the mean of all pushes until it has pushed).
    PushBytes push_bytes;
    std::optional<PushSample> round_push;
    allocation::PushPrice planned_price;
    // Handed a cap for the round being collected, and which: a worker joining an open round
    // gets what the round's budget leaves, or sits it out and starts with the next round.
    bool in_round = false;
    uint32_t round_cap = 0;
    // When its last round start was sent, and how long after one its last accepted push arrived
    // (0 = none yet from this process): its patience before its link is fitted (patienceFor).
    double round_sent_at = -1.0;  // -1 = never
    double observed_push_seconds = 0.0;
  };

  std::vector<Outgoing> handleJoin(const std::string& peer, const wire::Join& join);
  std::vector<Outgoing> handlePush(const std::string& peer, const Message& msg, size_t wire_bytes,
                                   double received_at);
  Outgoing reject(const std::string& peer, wire::Error::Code code, const std::string& reason,
                  const std::string& text);
  // How long a worker may stay silent before it is marked gone: worker_patience_seconds, or,
  // while its push for the open round is awaited, twice what its fitted link takes to carry
  // that push (up to the round's deadline) if longer; before its link is fitted, the round's
  // deadline until its first push, then twice what that push took to arrive (up to the
  // deadline): the worker's heartbeats queue behind a push on a slow uplink.
  double patienceFor(const Worker& w) const;
  // Sends w its round start, noting when (Worker::round_sent_at).
  Outgoing sendRoundStart(Worker& w);
  // The largest frame a worker is sent: the model's floats (a welcome) or a dense update, header
  // included (a round start or finish). Computed once.
  uint64_t largestFrameBytes();
  uint64_t largest_frame_bytes_ = 0;
  // The error message alone, not counted: an answer to a message that is not at fault.
  Outgoing errorTo(const std::string& peer, wire::Error::Code code, const std::string& text);
  Outgoing send(Worker& w, Message m);
  Worker* byPeer(const std::string& peer);
  void reallocate();
  // The budget at the measured mean push prices, and a worker's load priced at its own.
  allocation::Budget pricedBudget() const;
  void priceLoad(const Worker& w, allocation::WorkerLoad& load) const;
  // A worker's load as the allocators see it (its price and its link), share aside.
  allocation::WorkerLoad loadOf(const Worker& w) const;
  // True when the caps are planned in link seconds (cost-aware, seconds_per_round).
  bool plansSeconds() const;
  // A worker joining the round being collected: gives it a cap within what the round's budget
  // (bytes, coordinates, or cost-aware's link seconds) leaves after the caps already handed out,
  // or none (false) when not one coordinate fits.
  bool admitToRound(Worker& joiner);
  // False (the joiner sits the round out, logged) when admitToRound left it no cap.
  bool keepsSeat(Worker& joiner, const char* budget);
  // Admits the workers sitting out the open round that its budget now has room for, with their
  // round starts.
  std::vector<Outgoing> admitSittingOut();
  // Folds the round's pushes into the measured push bytes (each worker's and the mean of all),
  // and tells whether a plan input moved enough since the last plan to re-plan.
  bool planInputsMoved();
  std::vector<Outgoing> startRound();
  std::vector<Outgoing> closeRound();
  std::vector<Outgoing> finishAll();
  bool allPushed() const;
  // Every live worker has pushed or had its push refused, and the accepted ones may close.
  bool allAnswered() const;
  std::vector<Outgoing> refusePush(Worker& w, wire::Error::Code code, const std::string& reason,
                                   const std::string& text);
  double pushedShare() const;
  Message roundStartFor(const Worker& w) const;
  // The tuner's report with an accepted push (WorkerRecord::level and the predictions).
  void recordReport(Worker& w, const wire::Push& push);
  static void clearReport(WorkerRecord& rec);

  config::CoordinatorSettings settings_;
  std::unique_ptr<ml::Model> model_;
  std::shared_ptr<const ml::Dataset> test_;
  ml::Dataset eval_chunk_;  // the rows of the test set being evaluated
  std::function<void()> between_chunks_;
  size_t eval_chunk_rows_ = 0;
  double evaluate();
  uint64_t session_;
  Clock clock_;
  std::unique_ptr<allocation::Allocator> allocator_;
  ml::SgdOptimizer optimizer_;

  Phase phase_ = Phase::kWaiting;
  // Workers sent a Finish, and those of them that said they answer it and have not yet.
  std::set<uint32_t> told_to_finish_, finish_unacked_;
  bool started_ = false;
  // After a restore, training waits for min_workers to re-join (or, once one has, for a grace
  // period) so the first worker back does not run rounds alone.
  bool resuming_ = false;
  double resume_deadline_ = 0.0;
  bool checkpoint_due_ = false;
  std::vector<float> params_;
  std::vector<uint8_t> last_update_;  // encoded delta from model_{round-1} to model_{round}
  uint64_t previous_checksum_ = 0;    // tern::checksum of model_{round-1} (0 = not known)
  // tern::checksum of the model, computed at most once per round: when a join naming a replica
  // asks, or when the round closes (as the next round's previous_checksum_).
  std::optional<uint64_t> model_checksum_;
  uint64_t modelChecksum();
  uint64_t round_ = 0;  // the round being collected
  double round_deadline_ = 0.0;
  double start_time_ = 0.0;
  double resumed_elapsed_ = 0.0;  // time_s the restored checkpoint had reached
  uint64_t rounds_since_alloc_ = 0;
  allocation::Budget planned_budget_;
  bool link_moved_ = false;
  // What all accepted pushes cost on the wire: the price of a worker not yet measured.
  PushBytes push_bytes_;
  std::map<uint32_t, Worker> workers_;
  uint32_t next_id_ = 0;

  uint64_t upload_bytes_ = 0;
  uint64_t download_bytes_ = 0;
  uint64_t full_bytes_ = 0;
  uint64_t late_pushes_ = 0;
  uint64_t reasked_ = 0;  // round starts sent again after a refused push
  uint64_t bad_reports_ = 0;
  uint64_t steps_refused_ = 0;
  double last_accuracy_ = 0.0;
  bool accuracy_known_ = false;  // last_accuracy_ was measured (this run or the checkpoint's)
  RoundRecord last_record_;
  std::map<std::string, uint64_t> rejections_;
};

}  // namespace tern::server
