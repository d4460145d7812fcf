#pragma once
// A worker's gradients from an external trainer process (proto/trainer.proto, docs/python.md):
// the worker binds a ROUTER at trainer.endpoint, the trainer connects a DEALER and says Hello
// (its layout and data); each gradient request is a FitRequest with the parameters, answered by
// a FitResult with the gradient (or a local-steps delta). A trainer that crashes, hangs or answers
// wrongly fails the request (GradientResult::failure) and the worker sits the round out.
// The socket is used from one thread at a time: waitForHello before the compute thread starts,
// then gradient() on the computing thread and serveIdle() on the daemon's between requests;
// counters() may be read from any thread.
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/config/settings.hpp"
#include "common/transport/channel.hpp"
#include "worker/local_data.hpp"
#include "worker/trainer.hpp"

namespace tern::trainer {
class Envelope;
}

namespace tern::worker {

// What /status and /metrics show of the external trainer.
struct ExternalTrainerCounters {
  bool connected = false;       // a trainer said Hello and was accepted
  std::string framework;        // what the current trainer said it runs on
  uint64_t connections = 0;     // Hellos accepted (the first and every restart)
  uint64_t hellos_refused = 0;  // Hellos refused: another layout, a bad description
  uint64_t no_trainer = 0;      // requests with no trainer to send them to
  uint64_t timeouts = 0;        // requests the trainer did not answer in time
  uint64_t trainer_errors = 0;  // requests the trainer said it could not fit
  uint64_t bad_answers = 0;     // answers of the wrong size, kind or form
  uint64_t malformed = 0;       // messages that are no trainer-protocol envelope
  uint64_t late_answers = 0;    // answers to no waiting request (given up, never asked), ignored
  std::string last_error;
};

class ExternalTrainer final : public Trainer {
 public:
  // Binds at settings.endpoint (an ipc:// socket file left by an earlier run is removed first);
  // throws std::runtime_error if it cannot. Frames over max_message_bytes are refused by libzmq.
  ExternalTrainer(const config::TrainerSettings& settings, int64_t max_message_bytes);
  ~ExternalTrainer() override;
  ExternalTrainer(const ExternalTrainer&) = delete;
  ExternalTrainer& operator=(const ExternalTrainer&) = delete;

  // Asked while a request waits for its answer (on the computing thread): true abandons it.
  void setCancelled(std::function<bool()> cancelled) { cancelled_ = std::move(cancelled); }
  // Waits for a trainer's accepted Hello: what it trains on (shard null, tensors its layout);
  // nullopt when `stop` said stop first.
  std::optional<LocalData> waitForHello(const std::function<bool()>& stop);
  std::optional<GradientResult> gradient(const GradientRequest& request) override;
  // Between requests: answers a (restarted) trainer's Hello, counts late answers and strays, and
  // notes a trainer whose connections all closed (not connected); never blocks.
  void serveIdle();
  // The socket serveIdle reads (the daemon's loop wakes on it between requests).
  zmq::socket_t& socket() { return channel_.socket(); }
  ExternalTrainerCounters counters() const;
  const std::string& endpoint() const { return endpoint_; }
  // Training is over (the coordinator's Finish): when this object goes, the current trainer is
  // told Done{reason} (given up to a second to leave), so that it may exit. Any thread; without
  // it (a stop, a restart) the trainer is left waiting for the worker's return.
  void sayDoneAtExit(const std::string& reason);

 private:
  struct Incoming;
  // The next message within `timeout_ms` (0: only what is there); nullopt when none.
  std::optional<Incoming> receive(int timeout_ms);
  // Whether a Hello from `peer` is the current trainer's again on its same connection.
  bool isRefresh(const std::string& peer) const;
  // Takes a Hello from `peer`: answers it; true when it was accepted.
  bool onHello(const std::string& peer, const trainer::Envelope& env);
  // Why a Hello's description is unfit, or "".
  std::string helloProblem(const trainer::Envelope& env) const;
  bool sendFit(const GradientRequest& request);
  // The failure or result a FitResult answering `request` makes.
  GradientResult takeResult(const GradientRequest& request, const Incoming& in);
  GradientResult failed(const GradientRequest& request, const std::string& why,
                        uint64_t ExternalTrainerCounters::*counter);
  // With no trainer to send `request` to: waits briefly for one's Hello and sends it; false if
  // none came (or a stop).
  bool awaitTrainer(const GradientRequest& request);
  GradientResult noTrainer(const GradientRequest& request);
  // A message no request waits for: a Hello is taken, anything else counted and dropped.
  void takeStray(const Incoming& in);
  // Takes what is queued (at most a turn's worth), each as a stray.
  void takeWaiting();
  // A request's timeout: the setting, else the request's round deadline, else the default.
  double timeoutFor(const GradientRequest& request) const;
  // Answers `peer` with Error{text}.
  void sendError(const std::string& peer, const std::string& text);
  void sendEnvelope(const std::string& peer, const trainer::Envelope& env);
  void count(uint64_t ExternalTrainerCounters::*counter);
  bool cancelled() const { return cancelled_ && cancelled_(); }
  // Counts the connection events that came (none waited for).
  void takeConnectionEvents();

  std::string endpoint_;
  std::string socket_file_;                // ipc: the path to remove when done
  std::optional<double> timeout_seconds_;  // unset: timeoutFor the round deadline
  double said_timeout_ = 0.0;              // the timeout last logged
  zmq::context_t ctx_{1};
  transport::Channel channel_;
  // channel_'s connection events (a trainer connected, a connection closed: a trainer that
  // crashed), counted in connections_ by takeConnectionEvents (the computing thread's).
  zmq::socket_t monitor_{ctx_, zmq::socket_type::pair};
  int connections_ = 0;
  uint64_t disconnects_ = 0;       // connections closed so far
  uint64_t peer_disconnects_ = 0;  // disconnects_ when peer_ said its accepted Hello
  std::function<bool()> cancelled_;
  std::string peer_;  // the current trainer's identity ("" = none)
  // When the current trainer was sent the oldest request it has not answered (none: it owes
  // nothing); a request's time runs from here.
  std::optional<std::chrono::steady_clock::time_point> busy_since_;
  std::vector<ml::TensorShape> layout_;  // the first accepted trainer's
  std::optional<LocalData> described_;   // the first accepted trainer's description
  mutable std::mutex mutex_;
  ExternalTrainerCounters counters_;        // guarded by mutex_
  std::optional<std::string> done_reason_;  // guarded by mutex_: sayDoneAtExit's
};

}  // namespace tern::worker
