// tern-worker: the daemon around WorkerCore. It loads its shard, owns the DEALER socket, the poll
// loop and signals; every protocol decision is the core's.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <optional>
#include <random>

#include "common/config/command_line.hpp"
#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/ml/data_source.hpp"
#include "common/telemetry/daemon_cli.hpp"
#include "common/telemetry/daemon_telemetry.hpp"
#include "common/transport/curve_keys.hpp"
#include "common/transport/framing.hpp"
#include "common/transport/handshake_monitor.hpp"
#include "common/util/checksum.hpp"
#include "common/util/signals.hpp"
#include "common/util/steady_clock.hpp"
#include "worker/gradient_runner.hpp"
#include "worker/worker_core.hpp"

using namespace tern;

namespace {

// How long a worker stopped while its join is unanswered waits for the welcome, so that it can
// leave rather than be admitted and then waited for until the coordinator's patience runs out.
constexpr double kWelcomeGraceSeconds = 3.0;
// How long a stopping worker waits for the coordinator to answer its Leave: with the welcome's
// grace, within the unit's TimeoutStopSec of 15 s.
constexpr double kLeaveGraceSeconds = 8.0;

// What /status, /metrics and systemd's STATUS= show: this worker's own counters and link fit.
telemetry::NodeStatus workerStatus(const config::WorkerSettings& s, const worker::WorkerCore& core,
                                   uint64_t malformed, uint64_t auth_refused,
                                   uint64_t handshake_failed, double time_s,
                                   const std::string& state) {
  const auto& stats = core.stats();
  telemetry::NodeStatus st;
  st.role = "worker";
  st.name = s.name;
  st.version = TERN_VERSION;
  st.state = state;
  st.round = core.replicaRound();
  st.rounds_completed = stats.rounds;
  st.time_s = time_s;
  st.train_loss = stats.last_loss;
  st.upload_bytes = stats.pushed_bytes + stats.probe_bytes;  // as the coordinator counts them
  st.download_bytes = stats.received_bytes;
  st.alive_workers = core.joined() ? 1 : 0;
  st.rejected = {{"refused_coordinator_message", stats.rejected}, {"malformed", malformed}};
  st.counters = {{"probe_bytes", stats.probe_bytes},
                 {"pushes_taken_back", stats.taken_back},
                 {"non_finite_gradients", stats.non_finite_gradients},
                 {"pushes_trimmed_to_max_message", stats.trimmed},
                 {"pushes_trimmed_to_deadline", stats.deadline_trimmed},
                 {"pushes_past_deadline", stats.deadline_late},
                 {"rejoins", stats.rejoins},
                 {"stale_welcomes", stats.stale_welcomes},
                 {"repushes", stats.repushes},
                 {"connections_auth_refused", auth_refused},
                 {"connections_handshake_failed", handshake_failed}};
  auto fit = core.link().fit();
  telemetry::PeerStatus self;
  self.id = core.id();
  self.name = s.name;
  self.alive = core.joined();
  self.cap = core.cap();
  self.level = stats.last_level;
  self.predicted_cost = stats.last_predicted_cost;
  self.predicted_improvement = stats.last_predicted_improvement;
  self.predicted_step = stats.last_step;
  self.upload_bytes = stats.pushed_bytes + stats.probe_bytes;
  self.download_bytes = stats.received_bytes;
  self.share = stats.data_share;
  self.link = {fit.a, fit.b, fit.r2, fit.samples, fit.packet_bytes, fit.a_stderr, fit.b_stderr};
  st.workers.push_back(std::move(self));
  return st;
}

// The DEALER's security from the configuration: a CURVE client that knows the coordinator's
// public key, or plaintext (said explicitly in the configuration, warned about).
transport::CurveOptions curveClient(const config::SecuritySettings& sec) {
  transport::CurveOptions curve;
  if (!sec.curve()) {
    spdlog::warn(
        "security: none - connections are neither encrypted nor authenticated: the model and "
        "this worker's updates cross the network in the clear (docs/security.md)");
    return curve;
  }
  curve.secret_key = transport::readSecretKeyFile(sec.secret_key_file);
  curve.server_public_key =
      transport::readKeyFile(sec.server_public_key_file, "coordinator public key file");
  spdlog::info("CURVE on: this worker's public key {}, coordinator {}",
               transport::curvePublicKeyOf(curve.secret_key), curve.server_public_key);
  return curve;
}

// The DEALER to the coordinator: its handshakes, and a reconnection after a failed one (ZeroMQ
// does not retry those), backing off from 1 s to 8 s, so a key added to the allowlist later (and
// SIGHUP) lets it in.
struct CoordinatorLink {
  CoordinatorLink(zmq::context_t& ctx, const config::WorkerSettings& s)
      : channel(ctx, zmq::socket_type::dealer, channelOptions(s)),
        handshakes(ctx, channel.socket(), /*disconnects=*/true) {
    try {
      channel.connect(s.coordinator);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error("cannot connect to " + s.coordinator + ": " + e.what());
    }
  }
  static transport::ChannelOptions channelOptions(const config::WorkerSettings& s) {
    transport::ChannelOptions opts;
    opts.max_message_bytes = int64_t(s.max_message_bytes);
    opts.curve = curveClient(s.security);
    return opts;
  }
  // What the handshake monitor says; true when a handshake succeeded after a reconnection.
  bool watch(worker::WorkerCore& core, double now);
  void failed(const transport::HandshakeEvent& e, double now);
  void reconnect() {
    channel.reconnect();
    handshake_done = false;
  }
  void retryDue(double now) {
    if (!retry_at || now < *retry_at) return;
    retry_at.reset();
    reconnect();
    reconnected = true;
  }

  transport::Channel channel;
  transport::HandshakeMonitor handshakes;
  uint64_t auth_refused = 0, handshake_failed = 0, malformed = 0;
  double last_log = -1e9, retry_delay = 0.5;
  std::optional<double> retry_at;
  bool reconnected = false;
  bool handshake_done = false;  // on the current connection: what is queued on it can go out
};

bool CoordinatorLink::watch(worker::WorkerCore& core, double now) {
  bool rejoin = false;
  for (const auto& e : handshakes.drain()) {
    using Kind = transport::HandshakeEvent::Kind;
    if (e.kind == Kind::disconnected) {
      // libzmq reconnects by itself; what is queued goes out once the handshake is done again.
      handshake_done = false;
    } else if (e.kind == Kind::succeeded) {
      handshake_done = true;
      core.connectionUp(now);
      if (auth_refused + handshake_failed > 0)
        spdlog::info("handshake with the coordinator at {} succeeded", e.endpoint);
      retry_delay = 0.5;
      // libzmq reconnected by itself: a retry left from the failure would tear this connection
      // down. The join queued on the failed connection went with it: it goes again now.
      retry_at.reset();
      rejoin = rejoin || (reconnected && !core.joined());
      reconnected = false;
    } else {
      failed(e, now);
    }
  }
  return rejoin;
}

void CoordinatorLink::failed(const transport::HandshakeEvent& e, double now) {
  using Kind = transport::HandshakeEvent::Kind;
  ++(e.kind == Kind::refused ? auth_refused : handshake_failed);
  retry_delay = std::min(retry_delay * 2, 8.0);
  retry_at = now + retry_delay;
  // The operator learns why this worker does not join, at most once per interval.
  if (now - last_log < 10.0) return;
  last_log = now;
  if (e.kind == Kind::refused) {
    spdlog::error(
        "the coordinator at {} refused this worker's key (status {}, {} time(s)): is its public "
        "key on the coordinator's allowlist? retrying",
        e.endpoint, e.status, auth_refused);
  } else {
    spdlog::error(
        "handshake with the coordinator at {} failed ({} time(s)): do both sides use the same "
        "security mode, and is security.server_public_key_file the coordinator's key? retrying",
        e.endpoint, handshake_failed);
  }
}

// The worker daemon's loop around the core: messages in, effects out, the gradient on the
// runner's thread while this one keeps answering the coordinator and pinging the watchdog.
class WorkerDaemon {
 public:
  WorkerDaemon(const config::WorkerSettings& s, const telemetry::TelemetryOptions& tel_opts,
               std::shared_ptr<const ml::Dataset> shard, uint64_t partition);
  int run();

 private:
  void dispatch(worker::Effects e);
  void send(std::vector<Message> out);
  // Takes what the channel holds, bounded, so a stream of messages cannot hold back heartbeats.
  void receive(const std::function<void(const Message&, size_t)>& take, bool after_stop = false);
  void turn();
  void publish(const std::string& state);
  void waitForWelcome();
  void waitForLeaveAnswer();
  int finish(bool was_joined, bool was_finished);

  const config::WorkerSettings& s_;
  worker::WorkerCore core_;
  worker::GradientRunner runner_;
  zmq::context_t ctx_{1};
  CoordinatorLink link_;
  telemetry::DaemonTelemetry tel_;
  double first_round_at_ = -1.0;  // round durations count from the first round, not start-up
  uint64_t published_rounds_ = 0;
};

uint64_t processInstance() {
  std::random_device rd;
  return ((uint64_t(rd()) << 32) ^ rd()) | 1;  // never 0: "not given"
}

WorkerDaemon::WorkerDaemon(const config::WorkerSettings& s,
                           const telemetry::TelemetryOptions& tel_opts,
                           std::shared_ptr<const ml::Dataset> shard, uint64_t partition)
    : s_(s),
      core_(s, shard, processInstance()),
      // A stop during a long gradient ends it between chunks or local steps: the Leave goes out
      // within the unit's TimeoutStopSec, not after the computation.
      runner_(shard, [] { return stopRequested().load(); }),
      link_(ctx_, s),
      tel_(tel_opts, steadySeconds, workerStatus(s, core_, 0, 0, 0, 0.0, "starting")) {
  core_.setPartition(partition);
}

void WorkerDaemon::send(std::vector<Message> out) {
  for (auto& m : out) {
    if (auto sent = transport::sendMessage(link_.channel, "", m)) {
      core_.onSent(m, *sent, steadySeconds());
    } else {
      spdlog::debug("send would block; the coordinator may be unreachable");
    }
  }
}

void WorkerDaemon::dispatch(worker::Effects e) {
  send(std::move(e.send));
  if (e.compute) runner_.submit(std::move(*e.compute));
}

void WorkerDaemon::receive(const std::function<void(const Message&, size_t)>& take,
                           bool after_stop) {
  size_t taken = 0;
  while (taken++ < transport::kMaxMessagesPerTurn && (after_stop || !stopRequested())) {
    auto frames = link_.channel.receive();
    if (!frames) break;
    auto parsed = transport::parseFrames(*frames);
    if (!parsed.message) {
      ++link_.malformed;
      spdlog::warn("malformed message from the coordinator ({} so far): {}", link_.malformed,
                   parsed.error);
      continue;
    }
    take(*parsed.message, frames->bytes);
  }
}

void WorkerDaemon::publish(const std::string& state) {
  const auto& stats = core_.stats();
  if (first_round_at_ < 0 && stats.rounds > 0) first_round_at_ = steadySeconds();
  const double t = first_round_at_ < 0 ? 0.0 : steadySeconds() - first_round_at_;
  published_rounds_ = stats.rounds;
  tel_.publish(workerStatus(s_, core_, link_.malformed, link_.auth_refused, link_.handshake_failed,
                            t, state),
               fmt::format("{}: round {}, loss {:.4f}, level {}", state, core_.replicaRound(),
                           stats.last_loss, stats.last_level));
}

void WorkerDaemon::turn() {
  double wait = std::clamp(core_.nextWakeup() - steadySeconds(), 0.0, 0.1);
  if (runner_.busy()) wait = std::min(wait, 0.02);  // the gradient's answer is looked for often
  if (link_.retry_at) wait = std::clamp(*link_.retry_at - steadySeconds(), 0.0, wait);
  std::vector<zmq::socket_t*> also_wake_on{&link_.handshakes.socket()};
  const bool readable =
      link_.channel.waitReadable(std::chrono::milliseconds(int(wait * 1000)), also_wake_on);
  if (link_.watch(core_, steadySeconds())) dispatch(core_.start(steadySeconds()));
  link_.retryDue(steadySeconds());
  if (readable)
    receive([&](const Message& m, size_t b) { dispatch(core_.onMessage(m, b, steadySeconds())); });
  if (auto result = runner_.poll()) dispatch(core_.onGradient(*result, steadySeconds()));
  const uint64_t rejoins_before = core_.stats().rejoins;
  auto ticked = core_.onTick(steadySeconds());
  // A re-join on silence: the connection may be dead without the socket knowing, and what queued
  // on it (earlier joins, pushes) is stale. A new connection carries the join.
  if (core_.stats().rejoins != rejoins_before && !core_.joined()) link_.reconnect();
  dispatch(std::move(ticked));
  tel_.tick();
  if (core_.stats().rounds != published_rounds_ || tel_.publishDue())
    publish(core_.joined() ? "running" : "joining");
}

void WorkerDaemon::waitForWelcome() {
  // A join went out and its welcome may be on the way: the coordinator admits this worker with
  // it, and then must hear that it left. Only the welcome, or an error refusing the join, is
  // taken meanwhile; a welcome refused ends the wait (its Leave's answer is waited for next).
  const double give_up = steadySeconds() + kWelcomeGraceSeconds;
  while (core_.awaitingWelcome() && !core_.leaveUnanswered() && steadySeconds() < give_up) {
    if (!link_.channel.waitReadable(std::chrono::milliseconds(50))) continue;
    receive(
        [&](const Message& m, size_t bytes) {
          if (core_.leaveUnanswered()) {
            send(core_.afterStop(m, bytes, steadySeconds()));
          } else if (m.envelope.has_welcome() || m.envelope.has_error()) {
            send(core_.onMessage(m, bytes, steadySeconds()).send);
          }
        },
        /*after_stop=*/true);
  }
}

void WorkerDaemon::waitForLeaveAnswer() {
  // The Leave may queue behind a push still crossing a slow uplink, and closing the connection
  // with the coordinator's heartbeats unread resets it, dropping both. A coordinator that answers
  // Leaves says when it has them; a connection that ends meanwhile will not bring the answer.
  const double give_up = steadySeconds() + kLeaveGraceSeconds;
  std::vector<zmq::socket_t*> also_wake_on{&link_.handshakes.socket()};
  while (core_.leaveUnanswered() && link_.handshake_done && steadySeconds() < give_up) {
    tel_.tick();
    const bool readable = link_.channel.waitReadable(std::chrono::milliseconds(50), also_wake_on);
    link_.watch(core_, steadySeconds());
    if (!readable) continue;
    receive([&](const Message& m, size_t b) { send(core_.afterStop(m, b, steadySeconds())); },
            /*after_stop=*/true);
  }
  if (core_.leaveUnanswered() && !link_.handshake_done) {
    spdlog::warn("the connection to the coordinator ended before it answered the Leave");
  } else if (core_.leaveUnanswered()) {
    spdlog::warn(
        "the coordinator did not answer the Leave within {:g} s: it may hold this worker until "
        "its patience runs out",
        kLeaveGraceSeconds);
  }
}

int WorkerDaemon::run() {
  // A stop while the data loaded: a join now would admit a worker that is already leaving.
  if (!stopRequested()) dispatch(core_.start(steadySeconds()));
  tel_.ready("connecting to " + s_.coordinator);
  while (!core_.finished() && !stopRequested()) turn();
  // A gradient still computing is abandoned (the runner sees the stop between its chunks).
  runner_.abandon();
  link_.watch(core_, steadySeconds());
  const bool was_finished = core_.finished();
  send(core_.stop("stopped by signal", steadySeconds()));
  if (core_.awaitingWelcome() && link_.handshake_done) {
    waitForWelcome();
    send(core_.stop("stopped by signal", steadySeconds()));
  }
  const bool was_joined = core_.joined();
  if (core_.leaveUnanswered() && link_.handshake_done) waitForLeaveAnswer();
  return finish(was_joined, was_finished);
}

int WorkerDaemon::finish(bool was_joined, bool was_finished) {
  if (!was_joined) {
    // A join still queued on a connection being made must not go out after this worker is gone.
    link_.channel.socket().set(zmq::sockopt::linger, 0);
  } else if (was_finished) {
    // The Leave answering the coordinator's Finish, which the coordinator waits for, may queue
    // behind a late push on a slow uplink: it gets a few seconds (the unit allows 15 to stop).
    link_.channel.socket().set(zmq::sockopt::linger, 5000);
  }
  publish(core_.finished() ? "finished" : "stopped");
  tel_.stopping("stopping");
  auto fit = core_.link().fit();
  spdlog::info("link model: a={:.3g}s b={:.3g}s/packet r2={:.3f} samples={}", fit.a, fit.b, fit.r2,
               fit.samples);
  std::cout << "replica: round=" << core_.replicaRound() << " checksum=" << std::hex
            << checksum(core_.parameters()) << std::dec << std::endl;
  if (!core_.fatalError().empty()) {
    // Refused for good (another protocol version, a model that does not fit max_message_bytes,
    // a shard no model can train on): its own status, which the unit does not restart.
    std::cerr << "tern-worker: " << core_.fatalError() << '\n';
    return 3;
  }
  return 0;
}

int runWorker(const config::WorkerSettings& s, const telemetry::TelemetryOptions& tel_opts) {
  // First: a stop requested while the data loads is honoured by the loop, not by a kill.
  installSignalHandlers();
  spdlog::set_level(spdlog::level::from_str(s.logging.level));
  spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [{}] [%l] %v", s.name));
  uint64_t partition = 0;
  auto shard = std::make_shared<ml::Dataset>(exitIfStoppedDuring(
      [&] {
        return ml::loadShardOf(s.data, s.shard_index, s.shard_total, s.partition, &partition);
      },
      [] {
        spdlog::info("stopped while loading the data: not joining");
        spdlog::default_logger()->flush();
      }));
  spdlog::info("shard {}/{}: {} rows, {} features", s.shard_index, s.shard_total, shard->rows(),
               shard->features());
  WorkerDaemon daemon(s, tel_opts, shard, partition);
  if (stopRequested()) spdlog::info("stopped while loading the data: not joining");
  return daemon.run();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern worker: trains on its local shard and pushes compressed gradients"};
  app.set_version_flag("--version", std::string("tern-worker ") + TERN_VERSION);
  std::string config_file, coordinator, name, log_level;
  telemetry::HttpFlags http_flags;
  telemetry::KeygenCommand keygen;
  int shard_index = -1;
  app.add_option("--config", config_file, "YAML configuration file");
  app.add_option("--coordinator", coordinator, "coordinator endpoint (overrides 'coordinator')");
  auto* name_option = app.add_option("--name", name, "worker name (overrides 'name')");
  app.add_option("--shard-index", shard_index, "overrides data.shard.index")
      ->check(CLI::Range(0, int(config::kMaxWorkers) - 1));
  config::addLogLevelOption(app, log_level);
  telemetry::addHttpFlags(app, http_flags);
  telemetry::addKeygenCommand(app, keygen);
  if (auto rc = config::parseCommandLine(app, argc, argv)) return *rc;
  try {
    if (keygen.chosen()) return keygen.run();
    if (config_file.empty()) {
      std::cerr << "tern-worker: --config FILE is required (see --help)\n";
      return 2;
    }
    auto s = config::loadWorkerSettings(config_file);
    if (!coordinator.empty()) {
      if (auto why = config::endpointProblem(coordinator, false); !why.empty())
        throw config::ConfigError("--coordinator " + why);
      s.coordinator = coordinator;
    }
    if (*name_option) {
      if (auto why = config::workerNameProblem(name); !why.empty())
        throw config::ConfigError("--name " + why);
      s.name = name;
    }
    if (shard_index >= 0) {
      if (size_t(shard_index) >= s.shard_total) {
        std::cerr << "tern-worker: --shard-index must be below data.shard.total\n";
        return 2;
      }
      s.shard_index = size_t(shard_index);
    }
    if (!log_level.empty()) s.logging.level = log_level;
    const auto tel_opts = telemetry::telemetryOptions(s.http, http_flags);
    return runWorker(s, tel_opts);
  } catch (const config::ConfigError& e) {
    std::cerr << "tern-worker: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tern-worker: " << e.what() << '\n';
    return 1;
  }
}
