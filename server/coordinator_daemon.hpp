#pragma once
// tern-coordinator's driver: feeds the ROUTER's messages, the timers and a stop to the core and
// carries out the effects it returns (rows, checkpoint, then messages), in the daemon kit's poll
// loop, one phase per stage: the grace after a finished run resumes, training, and the wait for
// the workers' Leaves after the end. Evaluations are answered inline between two events.
#include <memory>
#include <optional>
#include <string>

#include "common/config/settings.hpp"
#include "common/daemon/poll_loop.hpp"
#include "common/ml/dataset.hpp"
#include "common/telemetry/daemon_telemetry.hpp"
#include "common/transport/channel.hpp"
#include "common/transport/frame_guard.hpp"
#include "common/transport/private_endpoint.hpp"
#include "server/coordinator_core.hpp"
#include "server/router_security.hpp"
#include "server/run_records.hpp"

namespace tern::server {

class CoordinatorDaemon {
 public:
  // test: the test set (nullptr without one); resumed: core was restored from the checkpoint;
  // fell_back: from its previous generation (counted in /metrics). Binds the telemetry
  // endpoint and sets up the ROUTER's security; run() binds the ROUTER.
  CoordinatorDaemon(const config::CoordinatorSettings& s, CoordinatorCore& core,
                    const ml::Dataset* test, bool resumed,
                    const telemetry::TelemetryOptions& tel_opts, bool fell_back = false);
  // Listens, trains until the end or a stop, says goodbye; the process's exit status.
  int run();

 private:
  // The loop's hooks: telemetry tick, SIGHUP reload, malformed messages answered.
  daemon::PollLoop::Options loopOptions();
  void listen();
  std::string listenBehindGuard();
  AuthCounters authCounters() const;
  // Answers every message again and again with SHUTTING_DOWN while a worker may stay silent.
  void servePastEnd();
  void train();
  // A stop before the end: a checkpoint (a pause), or the workers told to finish.
  void stopTraining();
  // Takes messages until every worker told to finish has left, or a round's deadline.
  void awaitLeaves();
  int finalReport();
  // Carries out an event's effects; received_at: when the message they answer was received.
  void dispatch(Effects effects, std::optional<double> received_at = {});
  void onMessage(daemon::Incoming& in);
  void publish(const std::string& state);
  void logRejections();
  // The checkpoint of now; /healthz degraded while checkpoints fail.
  void saveCheckpoint();

  const config::CoordinatorSettings& s_;
  CoordinatorCore& core_;
  const ml::Dataset* test_;
  bool resumed_;
  bool fell_back_;
  bool any_round_closed_ = false;
  RunRecords records_;
  telemetry::DaemonTelemetry tel_;
  zmq::context_t ctx_{1};
  transport::ChannelOptions channel_opts_;
  std::unique_ptr<transport::ZapHandler> zap_;  // until security_ takes it
  transport::Channel channel_;
  // The plaintext TCP listener in front of the ROUTER (nullptr with CURVE or a non-TCP bind).
  std::unique_ptr<transport::PrivateEndpoint> inside_;  // the ROUTER's socket behind the guard
  std::unique_ptr<transport::FrameGuard> guard_;
  RouterSecurity security_;
  daemon::PollLoop loop_;
  daemon::Throttle rejection_log_{10.0};
  daemon::Throttle guard_log_{10.0};
};

}  // namespace tern::server
