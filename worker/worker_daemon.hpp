#pragma once
// The worker daemon's loop around WorkerCore (common/daemon's PollLoop): messages in, the core's
// effects out, its gradient requests computed on the loop's background job while the loop keeps
// answering the coordinator; after a stop, the waits for a welcome on its way and for the
// Leave's answer.
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "common/config/settings.hpp"
#include "common/daemon/poll_loop.hpp"
#include "common/telemetry/daemon_telemetry.hpp"
#include "worker/dealer_security.hpp"
#include "worker/external_trainer.hpp"
#include "worker/trainer.hpp"
#include "worker/worker_core.hpp"

namespace tern::worker {

class WorkerDaemon {
 public:
  // Connects to the coordinator (throws if the endpoint is bad); joins in run(). Gradients come
  // from `external` when given (data is its trainer's description), else from the built-in
  // trainer over data's shard (evaluated on `eval`, if given).
  WorkerDaemon(const config::WorkerSettings& s, const telemetry::TelemetryOptions& tel_opts,
               LocalData data, std::shared_ptr<const ml::Dataset> eval,
               std::unique_ptr<ExternalTrainer> external);
  WorkerCore& core() { return core_; }
  // Trains until the coordinator finishes or a stop; the daemon's exit status.
  int run();

 private:
  static double now();
  daemon::PollLoop::Options loopOptions();
  void send(std::vector<Message> out);
  void dispatch(Effects e);
  // One gradient at a time on the loop's job: a newer request cancels the running one (whose
  // answer the core drops) and starts when it has ended.
  void compute(GradientRequest r);
  void onTurn();
  void publish(const std::string& state);
  telemetry::NodeStatus status(const std::string& state);
  daemon::Phase training();
  // A wait after the stop, of at most `seconds`, that tracks the connection.
  daemon::Phase grace(double seconds);
  void stopping();
  int finish(bool was_joined, bool was_finished);

  const config::WorkerSettings& s_;
  WorkerCore core_;
  std::stop_token job_stop_;  // the running gradient's (read on the job's thread only)
  std::unique_ptr<ExternalTrainer> external_;  // the external trainer, when there is one
  std::optional<ShardTrainer> builtin_;        // else the built-in one
  Trainer* trainer_;                           // the one of the two that computes
  std::optional<GradientRequest> next_;
  zmq::context_t ctx_{1};
  transport::Channel channel_;
  DealerConnection connection_;
  telemetry::DaemonTelemetry tel_;
  daemon::PollLoop loop_;
  uint64_t malformed_ = 0, published_rounds_ = 0;
  std::optional<double> first_round_at_;  // round durations count from the first round
};

}  // namespace tern::worker
