// tern-worker: the daemon around WorkerCore. It loads its shard, owns the DEALER socket, the poll
// loop and signals; every protocol decision is the core's.
#include <spdlog/spdlog.h>

#include <functional>
#include <future>
#include <iostream>
#include <random>
#include <variant>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/daemon/signals.hpp"
#include "common/ml/data_source.hpp"
#include "common/telemetry/daemon_telemetry.hpp"
#include "common/transport/framing.hpp"
#include "common/transport/handshake_monitor.hpp"
#include "common/util/checksum.hpp"
#include "common/util/steady_clock.hpp"
#include "worker/dealer_security.hpp"
#include "worker/worker_cli.hpp"
#include "worker/worker_core.hpp"
#include "worker/worker_status.hpp"

using namespace tern;
using daemon::exitIfStoppedDuring;
using daemon::installSignalHandlers;
using daemon::stopRequested;
using worker::curveClient;
using worker::workerStatus;

namespace {

// How long a worker stopped while its join is unanswered waits for the welcome, so that it can
// leave rather than be admitted and then waited for until the coordinator's patience runs out.
constexpr double kWelcomeGraceSeconds = 3.0;
// How long a stopping worker waits for the coordinator to answer its Leave: with the welcome's
// grace, within the unit's TimeoutStopSec of 15 s.
constexpr double kLeaveGraceSeconds = 8.0;

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
  std::random_device rd;
  const uint64_t instance = ((uint64_t(rd()) << 32) ^ rd()) | 1;  // never 0: "not given"
  worker::WorkerCore core(s, shard, steadySeconds, instance);
  core.setPartition(partition);
  // A stop during a long gradient ends it between chunks or local steps: the Leave goes out
  // within the unit's TimeoutStopSec, not after the computation.
  core.setStopCheck([] { return stopRequested().load(); });

  zmq::context_t ctx(1);
  transport::ChannelOptions opts;
  opts.max_message_bytes = int64_t(s.max_message_bytes);
  opts.curve = curveClient(s.security);
  transport::Channel channel(ctx, zmq::socket_type::dealer, opts);
  transport::HandshakeMonitor handshakes(ctx, channel.socket(), /*disconnects=*/true);
  std::vector<zmq::socket_t*> also_wake_on{&handshakes.socket()};
  try {
    channel.connect(s.coordinator);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot connect to " + s.coordinator + ": " + e.what());
  }
  uint64_t auth_refused = 0;
  uint64_t handshake_failed = 0;
  double last_handshake_log = -1e9;
  // ZeroMQ does not retry a connection whose handshake failed; this worker does, backing off
  // from 1 s to 8 s, so a key added to the allowlist later (and SIGHUP) lets it in.
  double retry_delay = 0.5;
  double retry_at = -1.0;
  bool reconnected = false;
  bool handshake_done = false;  // on the current connection: what is queued on it can go out
  uint64_t malformed = 0;
  telemetry::DaemonTelemetry tel(tel_opts, steadySeconds,
                                 workerStatus(s, core, malformed, 0, 0, 0.0, "starting"));
  double first_round_at = -1.0;  // round durations count from the first round, not start-up
  uint64_t published_rounds = 0;
  auto publish = [&](const std::string& state) {
    if (first_round_at < 0 && core.stats().rounds > 0) first_round_at = steadySeconds();
    double t = first_round_at < 0 ? 0.0 : steadySeconds() - first_round_at;
    published_rounds = core.stats().rounds;
    tel.publish(workerStatus(s, core, malformed, auth_refused, handshake_failed, t, state),
                fmt::format("{}: round {}, loss {:.4f}, level {}", state, core.replicaRound(),
                            core.stats().last_loss, core.stats().last_level));
  };

  auto dispatch = [&](std::vector<Message> out) {
    for (auto& m : out) {
      auto sent = transport::sendMessage(channel, "", m);
      if (sent) {
        core.onSent(m, *sent);
      } else {
        spdlog::debug("send would block; the coordinator may be unreachable");
      }
    }
  };
  // The operator learns why this worker does not join, at most once per interval.
  auto watchHandshakes = [&] {
    for (const auto& e : handshakes.drain()) {
      using Kind = transport::HandshakeEvent::Kind;
      if (e.kind == Kind::disconnected) {
        // libzmq reconnects by itself; what is queued goes out once the handshake is done again.
        handshake_done = false;
        continue;
      }
      if (e.kind == Kind::succeeded) {
        handshake_done = true;
        core.connectionUp();
        if (auth_refused + handshake_failed > 0) {
          spdlog::info("handshake with the coordinator at {} succeeded", e.endpoint);
        }
        retry_delay = 0.5;
        // libzmq reconnected by itself: a retry left from the failure would tear this
        // connection down (its queue, and the worker's identity at the coordinator).
        retry_at = -1.0;
        // The join queued on the failed connection went with it: send it again now rather
        // than after the coordinator's patience runs out.
        if (reconnected && !core.joined()) dispatch(core.start());
        reconnected = false;
        continue;
      }
      ++(e.kind == Kind::refused ? auth_refused : handshake_failed);
      double now = steadySeconds();
      retry_delay = std::min(retry_delay * 2, 8.0);
      retry_at = now + retry_delay;
      if (now - last_handshake_log < 10.0) continue;
      last_handshake_log = now;
      if (e.kind == Kind::refused) {
        spdlog::error(
            "the coordinator at {} refused this worker's key (status {}, {} time(s)): is its "
            "public key on the coordinator's allowlist? retrying",
            e.endpoint, e.status, auth_refused);
      } else {
        spdlog::error(
            "handshake with the coordinator at {} failed ({} time(s)): do both sides use the same "
            "security mode, and is security.server_public_key_file the coordinator's key? retrying",
            e.endpoint, handshake_failed);
      }
    }
  };
  // A round start is where the gradient is computed, which on a small board can take longer
  // than the coordinator's patience: it runs on a second thread while this one keeps sending the
  // worker's heartbeats and pinging the watchdog. The core is touched by the computation alone
  // until it returns; the heartbeat is built before it starts, and other messages wait queued.
  auto handle = [&](const Message& m, size_t bytes) -> std::vector<Message> {
    const auto beat = core.heartbeat();
    if (!m.envelope.has_round_start() || !beat) return core.onMessage(m, bytes);
    auto result = std::async(std::launch::async, [&] { return core.onMessage(m, bytes); });
    const double every = core.heartbeatInterval();
    double next_beat = steadySeconds() + every;
    while (result.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
      if (steadySeconds() >= next_beat) {
        if (!transport::sendMessage(channel, "", *beat)) {
          spdlog::debug("heartbeat during a computation would block");
        }
        next_beat = steadySeconds() + every;
      }
      tel.tick();
    }
    return result.get();
  };
  // What the channel holds, bounded, so that a stream of messages cannot hold back heartbeats and
  // the watchdog.
  // After a stop nothing more is taken: a round start would cost a computation (or its first
  // chunk) and a push just before the Leave; only the wait for a welcome after a stop
  // (after_stop) takes what comes, and filters it itself.
  auto receive = [&](const std::function<void(const Message&, size_t)>& take,
                     bool after_stop = false) {
    size_t taken = 0;
    while (taken++ < transport::kMaxMessagesPerTurn && (after_stop || !stopRequested())) {
      auto frames = channel.receive();
      if (!frames) break;
      auto parsed = transport::parseFrames(*frames);
      if (!parsed.message) {
        ++malformed;
        spdlog::warn("malformed message from the coordinator ({} so far): {}", malformed,
                     parsed.error);
        continue;
      }
      take(*parsed.message, frames->bytes);
    }
  };
  // A stop while the data loaded: a join now would admit a worker that is already leaving.
  if (!stopRequested()) {
    dispatch(core.start());
  } else {
    spdlog::info("stopped while loading the data: not joining");
  }
  tel.ready("connecting to " + s.coordinator);
  while (!core.finished() && !stopRequested()) {
    double wait = std::clamp(core.nextWakeup() - steadySeconds(), 0.0, 0.1);
    if (retry_at >= 0) wait = std::clamp(retry_at - steadySeconds(), 0.0, wait);
    bool readable = channel.waitReadable(std::chrono::milliseconds(int(wait * 1000)), also_wake_on);
    watchHandshakes();
    if (retry_at >= 0 && steadySeconds() >= retry_at) {
      retry_at = -1.0;
      channel.reconnect();
      reconnected = true;
      handshake_done = false;
    }
    if (readable) receive([&](const Message& m, size_t bytes) { dispatch(handle(m, bytes)); });
    const uint64_t rejoins_before = core.stats().rejoins;
    auto ticked = core.onTick();
    if (core.stats().rejoins != rejoins_before && !core.joined()) {
      // A re-join on silence: the connection may be dead without the socket knowing, and what
      // queued on it (earlier joins, pushes) is stale. A new connection carries the join.
      channel.reconnect();
      handshake_done = false;
    }
    dispatch(std::move(ticked));
    tel.tick();
    if (core.stats().rounds != published_rounds || tel.publishDue()) {
      publish(core.joined() ? "running" : "joining");
    }
  }
  // Handshakes since the loop last looked, whatever else they say.
  auto connectionNews = [&] {
    for (const auto& e : handshakes.drain()) {
      if (e.kind == transport::HandshakeEvent::Kind::succeeded) handshake_done = true;
      if (e.kind == transport::HandshakeEvent::Kind::disconnected) handshake_done = false;
    }
  };
  connectionNews();
  if (core.awaitingWelcome() && handshake_done) {
    // A join went out and its welcome may be on the way: the coordinator admits this worker
    // with it, and then must hear that it left. Only the welcome, or an error refusing the join
    // (no welcome will come), is taken meanwhile; what the core answers goes out (a welcome it
    // refuses is answered with a Leave).
    // A welcome refused ends the wait (the wait for its Leave's answer follows).
    const double give_up = steadySeconds() + kWelcomeGraceSeconds;
    while (core.awaitingWelcome() && !core.leaveUnanswered() && steadySeconds() < give_up) {
      if (!channel.waitReadable(std::chrono::milliseconds(50))) continue;
      receive(
          [&](const Message& m, size_t bytes) {
            if (core.leaveUnanswered()) {
              dispatch(core.afterStop(m, bytes));
            } else if (m.envelope.has_welcome() || m.envelope.has_error()) {
              dispatch(core.onMessage(m, bytes));
            }
          },
          /*after_stop=*/true);
    }
  }
  const bool was_joined = core.joined();
  const bool was_finished = core.finished();
  dispatch(core.stop("stopped by signal"));
  if (core.leaveUnanswered() && handshake_done) {
    // The Leave (or the one refusing a welcome) may queue behind a push still crossing a slow
    // uplink, and closing the connection with the coordinator's heartbeats unread resets it,
    // dropping both: the coordinator would hold this worker, and its round, until its patience.
    // A coordinator that answers Leaves says when it has them (and all that came before).
    // A connection that ends meanwhile (the coordinator exited: a checkpoint pause, a crash)
    // will not bring the answer.
    const double give_up = steadySeconds() + kLeaveGraceSeconds;
    while (core.leaveUnanswered() && handshake_done && steadySeconds() < give_up) {
      tel.tick();
      const bool readable = channel.waitReadable(std::chrono::milliseconds(50), also_wake_on);
      connectionNews();
      if (!readable) continue;
      receive([&](const Message& m, size_t bytes) { dispatch(core.afterStop(m, bytes)); },
              /*after_stop=*/true);
    }
    if (core.leaveUnanswered() && !handshake_done) {
      spdlog::warn("the connection to the coordinator ended before it answered the Leave");
    } else if (core.leaveUnanswered()) {
      spdlog::warn(
          "the coordinator did not answer the Leave within {:g} s: it may hold this worker "
          "until its patience runs out",
          kLeaveGraceSeconds);
    }
  }
  if (!was_joined) {
    // A join still queued on a connection being made must not go out after this worker is gone.
    channel.socket().set(zmq::sockopt::linger, 0);
  } else if (was_finished) {
    // The Leave answering the coordinator's Finish, which the coordinator waits for, may queue
    // behind a late push on a slow uplink: it gets a few seconds (the unit allows 15 to stop).
    channel.socket().set(zmq::sockopt::linger, 5000);
  }
  publish(core.finished() ? "finished" : "stopped");
  tel.stopping("stopping");
  auto fit = core.link().fit();
  spdlog::info("link model: a={:.3g}s b={:.3g}s/packet r2={:.3f} samples={}", fit.a, fit.b, fit.r2,
               fit.samples);
  std::cout << "replica: round=" << core.replicaRound() << " checksum=" << std::hex
            << checksum(core.parameters()) << std::dec << std::endl;
  if (!core.fatalError().empty()) {
    // Refused for good (another protocol version, a model that does not fit max_message_bytes,
    // a shard no model can train on): its own status, which the unit does not restart.
    std::cerr << "tern-worker: " << core.fatalError() << '\n';
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto command = worker::workerCommandLine(argc, argv);
    if (const int* rc = std::get_if<int>(&command)) return *rc;
    const auto& run = std::get<worker::WorkerRun>(command);
    return runWorker(run.settings, run.telemetry);
  } catch (const config::ConfigError& e) {
    std::cerr << "tern-worker: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tern-worker: " << e.what() << '\n';
    return 1;
  }
}
