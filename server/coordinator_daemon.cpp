#include "server/coordinator_daemon.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

#include "common/daemon/descriptor_limit.hpp"
#include "common/daemon/heap_policy.hpp"
#include "common/transport/framing.hpp"
#include "common/util/checksum.hpp"
#include "common/util/durable_file.hpp"
#include "common/util/steady_clock.hpp"
#include "server/coordinator_status.hpp"
#include "server/inline_evaluation.hpp"

namespace tern::server {

namespace {

transport::ChannelOptions channelOptions(const config::CoordinatorSettings& s,
                                         const CoordinatorCore& core) {
  transport::ChannelOptions opts;
  opts.max_message_bytes = int64_t(s.max_message_bytes);
  // A member that stops reading (while it heartbeats) is sent a whole model now and then; what
  // queues for it is bounded in bytes, not only in messages (docs/security.md).
  constexpr uint64_t kEnvelopeAndHeaders = 4096;
  opts.send_high_water_mark =
      transport::sendQueueFor(core.parameters().size() * sizeof(float) + kEnvelopeAndHeaders);
  return opts;
}

std::string rejectionReasons(const CoordinatorCore& core) {
  std::string reasons;
  for (const auto& [reason, n] : core.rejections()) reasons += fmt::format(" {}={}", reason, n);
  return reasons;
}

}  // namespace

CoordinatorDaemon::CoordinatorDaemon(const config::CoordinatorSettings& s, CoordinatorCore& core,
                                     const ml::Dataset* test, bool resumed,
                                     const telemetry::TelemetryOptions& tel_opts, bool fell_back)
    : s_(s),
      core_(core),
      test_(test),
      resumed_(resumed),
      fell_back_(fell_back),
      records_(s, resumed ? std::optional<uint64_t>(core.round()) : std::nullopt),
      tel_(tel_opts, steadySeconds, coordinatorStatus(s, core, false, "starting", AuthCounters{})),
      channel_opts_(channelOptions(s, core)),
      zap_(setUpSecurity(s.security, ctx_, channel_opts_)),
      channel_(ctx_, zmq::socket_type::router, channel_opts_),
      security_(ctx_, channel_, std::move(zap_), steadySeconds, s.joins.per_key),
      loop_(channel_, loopOptions()) {}

daemon::PollLoop::Options CoordinatorDaemon::loopOptions() {
  daemon::PollLoop::Options o;
  o.clock = steadySeconds;
  o.tick = [this] { tel_.tick(); };
  o.on_reload = [this] { security_.reload(); };
  o.on_malformed = [this](const std::string& peer, const transport::Parsed& parsed) {
    spdlog::debug("malformed message: {}", parsed.error);
    dispatch(core_.handleMalformed(peer, parsed.reason, steadySeconds()));
  };
  return o;
}

int CoordinatorDaemon::run() {
  listen();
  if (resumed_ && core_.finished()) servePastEnd();
  train();
  if (!core_.finished()) stopTraining();
  if (!core_.finishAcknowledged()) awaitLeaves();
  return finalReport();
}

void CoordinatorDaemon::listen() {
  std::string endpoint;
  try {
    const bool plaintext_tcp = !s_.security.curve() && s_.bind.rfind("tcp://", 0) == 0;
    endpoint = plaintext_tcp ? listenBehindGuard() : channel_.bind(s_.bind);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot listen on " + s_.bind + ": " + e.what());
  }
  // A dense update, a dense push: the largest buffers a round allocates.
  daemon::keepBuffersOf(core_.parameters().size() * sizeof(float));
  spdlog::info("coordinator listening on {} (session {:x}, {} parameters, waiting for {} workers)",
               endpoint, core_.session(), core_.parameters().size(), s_.min_workers);
  if (!s_.endpoint_file.empty()) writeFileAtomically(s_.endpoint_file, endpoint + '\n');
  tel_.ready("listening on " + endpoint);
  publish("waiting");
}

// Plaintext: the ROUTER on a private unix socket, the frame guard on the configured endpoint
// (docs/security.md, "What one peer can make the coordinator hold").
std::string CoordinatorDaemon::listenBehindGuard() {
  transport::FrameGuardOptions opts;
  opts.limits.max_frame_bytes = s_.max_message_bytes;
  opts.limits.max_message_bytes = s_.max_message_bytes + transport::kMaxEnvelopeBytes;
  // Descriptors for everything but the relayed connections: libzmq's own, the telemetry
  // server's 32 connections, checkpoint and CSV files, the logs.
  constexpr uint64_t kReservedDescriptors = 256;
  opts.max_connections =
      transport::connectionsWithin(daemon::raiseDescriptorLimit(), opts, kReservedDescriptors);
  spdlog::info("relaying at most {} connections at once (the file descriptor limit)",
               opts.max_connections);
  guard_ = std::make_unique<transport::FrameGuard>(opts);
  inside_ = std::make_unique<transport::PrivateEndpoint>();
  if (inside_->swept() > 0)
    spdlog::info("removed {} directories of coordinators no longer running (their ROUTER sockets)",
                 inside_->swept());
  channel_.bind(inside_->endpoint());
  return guard_->start(s_.bind, inside_->endpoint());
}

AuthCounters CoordinatorDaemon::authCounters() const {
  AuthCounters auth = security_.counters();
  if (guard_) auth.guard_refused = guard_->counts().refused;
  return auth;
}

void CoordinatorDaemon::servePastEnd() {
  // The workers of the run may still be waiting for it (a checkpoint at or past max_rounds
  // taken mid-run, or workers restarted after the end): for as long as a worker may stay
  // silent, every message is answered SHUTTING_DOWN, and each worker that asks finishes
  // instead of re-joining forever. The security watches are served on every turn, or no CURVE
  // worker gets in to be told.
  daemon::Phase grace;
  grace.deadline =
      steadySeconds() + std::max(s_.worker_patience_seconds, s_.round_deadline_seconds);
  grace.watches = security_.watches();
  grace.on_message = [this](daemon::Incoming& in) { onMessage(in); };
  loop_.run(grace);
}

void CoordinatorDaemon::train() {
  daemon::Phase training;
  training.done = [this] { return core_.finished(); };
  training.next_wakeup = [this] { return core_.nextTimeout(steadySeconds()); };
  training.watches = security_.watches();
  training.on_message = [this](daemon::Incoming& in) { onMessage(in); };
  training.on_turn = [this] {
    // Timer work is due only at the core's next wake-up (a heap look-up to ask): a turn that
    // only took messages skips it, since each timeout walks the worker table.
    const double now = steadySeconds();
    if (now >= core_.nextTimeout(now)) dispatch(core_.handleTimeout(now));
    if (tel_.publishDue()) publish(any_round_closed_ ? "running" : "waiting");
    logRejections();
  };
  loop_.run(training);
}

void CoordinatorDaemon::stopTraining() {
  if (!s_.checkpoint.path.empty() && core_.round() == 0) {
    // Nothing trained (stopped while loading, or waiting for min_workers): a checkpoint would
    // make the next start a resume, past min_workers and bound to this model.
    spdlog::info(
        "stop requested before any round: no checkpoint written; workers wait for a restart");
  } else if (!s_.checkpoint.path.empty()) {
    // With checkpoints a stop is a pause: the workers keep waiting and re-join the restarted
    // coordinator on their own.
    saveCheckpoint();
    if (!records_.checkpointFailed()) {
      spdlog::info("stop requested: checkpoint written at round {}; workers wait for a restart",
                   core_.round());
    }
  } else {
    spdlog::info("stop requested: telling workers to finish");
    dispatch(core_.handleStop(steadySeconds()));
  }
}

void CoordinatorDaemon::awaitLeaves() {
  // A Finish carries the last round's update, seconds of bytes on a slow downlink, and what of
  // it is still queued when the process ends is lost (libzmq's linger covers only its own
  // queue; the kernel resets a connection closed with a peer's bytes unread). Each worker
  // answers its Finish with a Leave; until all have, or a round's deadline (1 to 20 s: the
  // unit allows 30 s to stop) has passed, messages are taken and answered, stop or not.
  const double wait = std::clamp(s_.round_deadline_seconds, 1.0, 20.0);
  spdlog::info("waiting up to {:g} s for {} worker(s) to confirm the end of training", wait,
               core_.finishUnacknowledged());
  publish("finishing");
  daemon::Phase leaves;
  leaves.done = [this] { return core_.finishAcknowledged(); };
  leaves.deadline = steadySeconds() + wait;
  leaves.ends_on_stop = false;
  leaves.max_wait_seconds = 0.05;
  leaves.watches = security_.watches();
  leaves.on_message = [this](daemon::Incoming& in) { onMessage(in); };
  loop_.run(leaves);
  if (!core_.finishAcknowledged()) {
    spdlog::warn(
        "{} worker(s) did not confirm within {:g} s that the end of training reached them "
        "(gone, or a slow link): they may not have the final model",
        core_.finishUnacknowledged(), wait);
  }
}

int CoordinatorDaemon::finalReport() {
  const AuthCounters auth = authCounters();
  publish(core_.finished() ? "finished" : "stopped");
  tel_.stopping(systemdStatus(coordinatorStatus(s_, core_, any_round_closed_, "stopping", auth)));
  std::cout << "model: round=" << core_.round() << " checksum=" << std::hex
            << checksum(core_.parameters()) << std::dec << std::endl;
  // Every refused message, by reason, over the whole run (a resumed run includes the earlier part).
  std::cout << "rejections: total=" << core_.rejectedTotal() << rejectionReasons(core_)
            << std::endl;
  std::cout << "connections: admitted=" << auth.admitted << " auth_refused=" << auth.refused
            << " handshake_failed=" << auth.handshake_failed
            << " guard_refused=" << auth.guard_refused << std::endl;
  // Rounds closed (a resumed run counts the earlier part); bytes up to now, pushes of a round
  // left open included.
  std::cout << finalLine(core_.round(), core_.accuracy(),
                         {core_.uploadBytes(), core_.downloadBytes(), core_.fullBytes()})
            << std::endl;
  // The last checkpoint could not be written: a restart would redo rounds, so say so. A finished
  // run's (3) is not for a restart, which would resume the older checkpoint and wait for
  // workers that were told training is over.
  if (!records_.checkpointFailed()) return 0;
  return core_.finished() ? 3 : 1;
}

void CoordinatorDaemon::dispatch(Effects effects, std::optional<double> received_at) {
  // Evaluations run here, on the protocol thread, between two events: the watchdog is pinged
  // between chunks of rows (a large test set on a small board can outlast WatchdogSec).
  effects =
      evaluateInline(core_, std::move(effects), test_, steadySeconds, [this] { tel_.tick(); });
  // The closed rounds' metrics rows go out first and the checkpoint next, both before the
  // messages of the event that made them due: no worker is told of a round's result that a
  // crash right after could lose, and a crash between row and checkpoint redoes rounds whose
  // rows exist rather than leaving a round without one.
  if (!effects.closed_rounds.empty()) {
    records_.report(effects.closed_rounds);
    any_round_closed_ = true;
    publish("running");
  }
  if (effects.checkpoint_due) saveCheckpoint();
  for (auto& o : effects.messages) {
    // Re-stamped right before the socket: the hold includes the rows and the checkpoint.
    if (received_at) stampAckHold(o.message, *received_at, steadySeconds());
    if (!transport::sendMessage(channel_, o.peer, o.message)) {
      spdlog::debug("could not send to a peer (gone or queue full)");
    }
  }
}

void CoordinatorDaemon::onMessage(daemon::Incoming& in) {
  // With CURVE a join is checked against its sender's key first (the ZAP user id).
  if (const auto& env = in.message.envelope;
      env.has_join() && env.version() == wire::PROTOCOL_VERSION) {
    if (auto refusal = security_.checkJoin(in.user_id, env.join().worker_name())) {
      dispatch(core_.refuseJoin(in.peer, *refusal, steadySeconds()));
      return;
    }
  }
  dispatch(core_.handleMessage(in.peer, in.message, in.bytes, in.received_at, steadySeconds()),
           in.received_at);
}

void CoordinatorDaemon::saveCheckpoint() {
  records_.saveCheckpoint(core_);
  const std::string& failure = records_.checkpoints().failure();
  tel_.setDegraded(failure.empty() ? "" : "checkpoint not written: " + failure);
}

void CoordinatorDaemon::publish(const std::string& state) {
  auto st = coordinatorStatus(s_, core_, any_round_closed_, state, authCounters());
  if (!s_.checkpoint.path.empty()) {
    st.counters["checkpoint_write_failures"] = {records_.checkpoints().failures(),
                                                "Checkpoint writes that failed."};
    st.counters["checkpoint_fallbacks"] = {
        fell_back_ ? 1u : 0u, "Starts resumed from the previous checkpoint, the newest unusable."};
  }
  tel_.publish(st, systemdStatus(st));
}

void CoordinatorDaemon::logRejections() {
  if (rejection_log_.changed(core_.rejectedTotal(), steadySeconds())) {
    spdlog::warn("rejected messages so far:{}", rejectionReasons(core_));
  }
  if (guard_ && guard_log_.changed(guard_->counts().refused, steadySeconds())) {
    spdlog::warn("connections the frame guard closed: {} so far, the latest {}",
                 guard_->counts().refused, guard_->lastRefusal());
  }
}

}  // namespace tern::server
