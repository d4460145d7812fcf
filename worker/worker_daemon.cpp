#include "worker/worker_daemon.hpp"

#include <spdlog/spdlog.h>

#include <iostream>
#include <random>

#include "common/daemon/heap_policy.hpp"
#include "common/util/checksum.hpp"
#include "common/util/steady_clock.hpp"
#include "worker/worker_status.hpp"

namespace tern::worker {

using daemon::stopRequested;

namespace {

// How long a worker stopped while its join is unanswered waits for the welcome, so that it can
// leave rather than be admitted and then waited for until the coordinator's patience runs out.
constexpr double kWelcomeGraceSeconds = 3.0;
// How long a stopping worker waits for the coordinator to answer its Leave: with the welcome's
// grace, within the unit's TimeoutStopSec of 15 s.
constexpr double kLeaveGraceSeconds = 8.0;

transport::ChannelOptions channelOptions(const config::WorkerSettings& s) {
  transport::ChannelOptions opts;
  opts.max_message_bytes = int64_t(s.max_message_bytes);
  opts.curve = curveClient(s.security);
  return opts;
}

uint64_t processInstance() {
  std::random_device rd;
  return ((uint64_t(rd()) << 32) ^ rd()) | 1;  // never 0: "not given"
}

}  // namespace

WorkerDaemon::WorkerDaemon(const config::WorkerSettings& s,
                           const telemetry::TelemetryOptions& tel_opts, LocalData data,
                           std::shared_ptr<const ml::Dataset> eval,
                           std::unique_ptr<ExternalTrainer> external)
    : s_(s),
      core_(workerOptions(s), data, processInstance()),
      external_(std::move(external)),
      trainer_(nullptr),
      channel_(ctx_, zmq::socket_type::dealer, channelOptions(s)),
      connection_(ctx_, channel_, steadySeconds),
      tel_(tel_opts, steadySeconds, workerStatus(s, core_, {}, 0.0, "starting")),
      loop_(channel_, loopOptions()) {
  // A stop (or a newer request) ends a gradient between its chunks or local steps, or while it
  // waits for the external trainer's answer.
  auto cancelled = [this] { return job_stop_.stop_requested(); };
  if (external_) {
    external_->setCancelled(cancelled);
    trainer_ = external_.get();
  } else {
    trainer_ = &builtin_.emplace(data.shard, cancelled, std::move(eval));
  }
  try {
    channel_.connect(s.coordinator);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot connect to " + s.coordinator + ": " + e.what());
  }
}

double WorkerDaemon::now() { return steadySeconds(); }

daemon::PollLoop::Options WorkerDaemon::loopOptions() {
  daemon::PollLoop::Options o;
  o.clock = steadySeconds;
  o.tick = [this] { tel_.tick(); };
  o.on_malformed = [this](const std::string&, const transport::Parsed& p) {
    spdlog::warn("malformed message from the coordinator ({} so far): {}", ++malformed_, p.error);
  };
  return o;
}

void WorkerDaemon::send(std::vector<Message> out) {
  for (auto& m : out) {
    if (auto sent = transport::sendMessage(channel_, "", m)) {
      core_.onSent(m, *sent, now());
    } else {
      spdlog::debug("send would block; the coordinator may be unreachable");
    }
  }
}

void WorkerDaemon::dispatch(Effects e) {
  send(std::move(e.send));
  if (e.compute) compute(std::move(*e.compute));
}

void WorkerDaemon::compute(GradientRequest r) {
  if (loop_.jobRunning()) {
    next_ = std::move(r);
    return loop_.cancelJob();
  }
  loop_.startJob(
      [this, r](std::stop_token stop) {
        job_stop_ = stop;
        return trainer_->gradient(r);
      },
      [this](std::optional<GradientResult> result) {
        if (result) dispatch(core_.onGradient(*result, now()));
        if (auto next = std::exchange(next_, std::nullopt)) compute(std::move(*next));
      });
}

void WorkerDaemon::onTurn() {
  connection_.retryIfDue();
  const uint64_t rejoins_before = core_.stats().rejoins;
  auto ticked = core_.onTick(now());
  // A re-join on silence: the connection may be dead without the socket knowing, and what queued
  // on it is stale. A new connection carries the join.
  if (core_.stats().rejoins != rejoins_before && !core_.joined()) connection_.renew();
  dispatch(std::move(ticked));
  if (core_.stats().rounds != published_rounds_ || tel_.publishDue())
    publish(core_.joined() ? "running" : "joining");
}

void WorkerDaemon::publish(const std::string& state) {
  // Not admitted (a model of another layout, a full table, a name taken): /healthz says why.
  const std::string& refusal = core_.joinRefusal();
  tel_.setDegraded(refusal.empty() ? "" : "not admitted: " + refusal);
  const auto& st = core_.stats();
  if (!first_round_at_ && st.rounds > 0) first_round_at_ = now();
  published_rounds_ = st.rounds;
  tel_.publish(status(state), fmt::format("{}: round {}, loss {:.4f}, level {}", state,
                                          core_.replicaRound(), st.last_loss, st.last_level));
}

telemetry::NodeStatus WorkerDaemon::status(const std::string& state) {
  std::optional<ExternalTrainerCounters> trainer;
  if (external_) trainer = external_->counters();
  return workerStatus(
      s_, core_, {malformed_, connection_.authRefused(), connection_.handshakeFailed(), trainer},
      first_round_at_ ? now() - *first_round_at_ : 0.0, state);
}

daemon::Phase WorkerDaemon::training() {
  daemon::Phase p;
  p.done = [this] { return core_.finished(); };
  p.next_wakeup = [this] {
    return std::min(core_.nextWakeup(), connection_.retryAt().value_or(1e300));
  };
  p.watches = {connection_.watch([this](bool reconnected) {
    core_.connectionUp(now());
    // The join queued on a failed connection went with it: it goes again now.
    if (reconnected && !core_.joined()) dispatch(core_.start(now()));
  })};
  // Between requests the trainer's socket is the loop's: a restarted trainer's Hello is answered
  // at once and a trainer gone shows as not connected (during one, gradient() reads it).
  if (external_) {
    p.watches.push_back({&external_->socket(), [this] { external_->serveIdle(); },
                         [this] { return !loop_.jobRunning(); }});
  }
  p.on_message = [this](daemon::Incoming& in) {
    dispatch(core_.onMessage(in.message, in.bytes, now()));
    // Once the welcome has given the model: its gradients and updates reuse heap pages.
    daemon::keepBuffersOf(core_.parameters().size() * sizeof(float));
  };
  p.on_turn = [this] { onTurn(); };
  return p;
}

daemon::Phase WorkerDaemon::grace(double seconds) {
  daemon::Phase p;
  p.deadline = now() + seconds;
  p.ends_on_stop = false;  // it follows the stop
  p.watches = {connection_.watch({})};
  return p;
}

void WorkerDaemon::stopping() {
  // A gradient still computing is abandoned with the stop (the job's token is asked to stop).
  loop_.cancelJob();
  send(core_.stop("stopped by signal", now()));
  if (core_.awaitingWelcome() && connection_.up()) {
    // The welcome may be on the way: the coordinator admits this worker with it, and must then
    // hear that it left. Only the welcome or an error refusing the join is taken meanwhile.
    daemon::Phase p = grace(kWelcomeGraceSeconds);
    p.done = [this] { return !core_.awaitingWelcome() || core_.leaveUnanswered(); };
    p.on_message = [this](daemon::Incoming& in) {
      const auto& env = in.message.envelope;
      if (env.has_welcome() || env.has_error())
        send(core_.onMessage(in.message, in.bytes, now()).send);
    };
    loop_.run(p);
    send(core_.stop("stopped by signal", now()));
  }
  if (!core_.leaveUnanswered() || !connection_.up()) return;
  // The Leave may queue behind a push still crossing a slow uplink; closing the connection with
  // the coordinator's heartbeats unread resets it, dropping both. A coordinator that answers
  // Leaves says when it has them; a connection that ends meanwhile will not bring the answer.
  daemon::Phase p = grace(kLeaveGraceSeconds);
  p.done = [this] { return !core_.leaveUnanswered() || !connection_.up(); };
  p.on_message = [this](daemon::Incoming& in) {
    send(core_.afterStop(in.message, in.bytes, now()));
  };
  const auto exit = loop_.run(p);
  if (core_.leaveUnanswered() && exit == daemon::Exit::done)
    spdlog::warn("the connection to the coordinator ended before it answered the Leave");
  else if (core_.leaveUnanswered())
    spdlog::warn(
        "the coordinator did not answer the Leave within {:g} s: it may hold this worker "
        "until its patience runs out",
        kLeaveGraceSeconds);
}

int WorkerDaemon::run() {
  // A stop while the data loaded: a join now would admit a worker that is already leaving.
  if (!stopRequested()) dispatch(core_.start(now()));
  tel_.ready("connecting to " + s_.coordinator);
  loop_.run(training());
  const bool was_finished = core_.finished();
  stopping();
  return finish(core_.joined(), was_finished);
}

int WorkerDaemon::finish(bool was_joined, bool was_finished) {
  if (!was_joined) {
    // A join still queued on a connection being made must not go out after this worker is gone.
    channel_.socket().set(zmq::sockopt::linger, 0);
  } else if (was_finished) {
    // The Leave answering the coordinator's Finish may queue behind a late push on a slow
    // uplink: it gets a few seconds (the unit allows 15 to stop).
    channel_.socket().set(zmq::sockopt::linger, 5000);
  }
  if (was_finished && external_)
    external_->sayDoneAtExit(core_.fatalError().empty() ? "the coordinator finished training"
                                                        : core_.fatalError());
  publish(core_.finished() ? "finished" : "stopped");
  tel_.stopping("stopping");
  const auto fit = core_.link().fit();
  spdlog::info("link model: a={:.3g}s b={:.3g}s/packet r2={:.3f} samples={}", fit.a, fit.b, fit.r2,
               fit.samples);
  std::cout << "replica: round=" << core_.replicaRound() << " checksum=" << std::hex
            << checksum(core_.parameters()) << std::dec << std::endl;
  if (core_.fatalError().empty()) return 0;
  // Refused for good (another protocol version, a model that does not fit max_message_bytes, a
  // shard no model can train on): its own status, which the unit does not restart.
  std::cerr << "tern-worker: " << core_.fatalError() << '\n';
  return 3;
}

}  // namespace tern::worker
