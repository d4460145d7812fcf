// tern-coordinator: the daemon around CoordinatorCore. It owns the ROUTER socket, the poll loop,
// signals and files; every protocol decision is the core's.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
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
#include "common/util/durable_file.hpp"
#include "common/util/steady_clock.hpp"
#include "server/coordinator_cli.hpp"
#include "server/coordinator_core.hpp"
#include "server/coordinator_status.hpp"
#include "server/inline_evaluation.hpp"
#include "server/metrics_csv.hpp"
#include "server/router_security.hpp"

using namespace tern;
using daemon::exitIfStoppedDuring;
using daemon::installSignalHandlers;
using daemon::reloadRequested;
using daemon::stopRequested;
using server::AuthCounters;
using server::reloadAllowlist;
using server::setUpSecurity;
using server::systemdStatus;

namespace {

int runCoordinator(config::CoordinatorSettings s, const telemetry::TelemetryOptions& tel_opts) {
  // First: a stop requested while the data loads is honoured by the loop, not by a kill.
  installSignalHandlers();
  spdlog::set_level(spdlog::level::from_str(s.logging.level));
  // libprotobuf logs a line for every hostile envelope it fails to parse (e.g. invalid UTF-8):
  // a flood of bad input would become a flood of log lines. Those messages are refused, counted
  // by reason and logged at a bounded rate by the loop below instead.
  google::protobuf::SetLogHandler(nullptr);
  std::shared_ptr<const ml::Dataset> test;
  if (!s.test_data.format.empty()) {
    test = std::make_shared<ml::Dataset>(
        exitIfStoppedDuring([&] { return ml::loadDataset(s.test_data); },
                            [] {
                              spdlog::info("stopped while loading the test data: exiting");
                              spdlog::default_logger()->flush();
                            }));
    if (s.model.features == 0) s.model.features = uint32_t(test->features());
    // Here, not at the first evaluation, which would end a run already under way.
    ml::requireFitsModel("test_data", s.test_data, *test, s.model);
    spdlog::info("test set: {} rows, {} features", test->rows(), test->features());
  }
  if (s.model.features == 0) {
    throw std::runtime_error("model.features is not set and there is no test_data to infer it");
  }
  auto model = ml::makeModel(s.model);
  std::random_device rd;
  uint64_t session = (uint64_t(rd()) << 32) ^ rd();
  // A resumed coordinator takes a new session: every worker's old-session message is refused
  // with UNKNOWN_SESSION, so each re-joins and takes the checkpointed model in full.
  std::unique_ptr<server::CoordinatorCore> core_ptr;
  bool resumed = false;
  if (!s.checkpoint.path.empty()) {
    checkWritable(s.checkpoint.path);
    if (auto bytes = readFileIfExists(s.checkpoint.path)) {
      try {
        core_ptr = server::CoordinatorCore::restore(s, std::move(model), test != nullptr, session,
                                                    *bytes, steadySeconds());
      } catch (const std::exception& e) {
        throw std::runtime_error(s.checkpoint.path + ": " + e.what());
      }
      spdlog::info("resumed from checkpoint {} at round {}", s.checkpoint.path, core_ptr->round());
      if (core_ptr->finished()) {
        const bool at_limit = core_ptr->round() >= s.max_rounds;
        const bool at_target =
            s.target_accuracy > 0 && core_ptr->lastAccuracy() >= s.target_accuracy;
        std::string why;
        if (at_limit) why = "max_rounds is " + std::to_string(s.max_rounds);
        if (at_target)
          why += fmt::format("{}it reached target_accuracy {} with {:.4f}", at_limit ? " and " : "",
                             s.target_accuracy, core_ptr->lastAccuracy());
        why += at_limit && at_target ? " (raise both to train on"
               : at_limit            ? " (raise it to train on"
                                     : " (raise the target above that to train on";
        spdlog::warn(
            "training had already finished at round {}: nothing to do, {}, or remove {} to start "
            "again)",
            core_ptr->round(), why, s.checkpoint.path);
      }
      resumed = true;
    }
  }
  if (!core_ptr) {
    core_ptr = std::make_unique<server::CoordinatorCore>(s, std::move(model), test != nullptr,
                                                         session, steadySeconds());
  }
  server::CoordinatorCore& core = *core_ptr;
  std::unique_ptr<server::MetricsCsv> csv;
  if (!s.metrics_csv.empty()) {
    // A resumed run continues its CSV (rows of the rounds it redoes are dropped).
    if (!resumed && server::MetricsCsv::keepPrevious(s.metrics_csv)) {
      spdlog::info("metrics CSV {} held an earlier run: kept as {}.old", s.metrics_csv,
                   s.metrics_csv);
    }
    csv = resumed ? std::make_unique<server::MetricsCsv>(s.metrics_csv, core.round())
                  : std::make_unique<server::MetricsCsv>(s.metrics_csv);
  }
  // A checkpoint that cannot be written (disk full, directory gone) does not end the run: the
  // last one written stays on disk, training goes on, and the next one falls due as usual.
  bool checkpoint_failed = false;
  auto saveCheckpoint = [&] {
    if (s.checkpoint.path.empty()) return true;
    // The rows of the rounds before the checkpoint reach the disk first: after a power loss the
    // resumed run would not redo those rounds, and their rows would be missing for good.
    if (csv && !csv->sync()) {
      spdlog::error("metrics CSV {}: cannot sync its rows to disk: {}", s.metrics_csv,
                    std::strerror(errno));
    }
    try {
      writeFileAtomically(s.checkpoint.path, core.checkpoint(steadySeconds()));
      spdlog::debug("checkpoint written at round {}", core.round());
      checkpoint_failed = false;
    } catch (const std::exception& e) {
      spdlog::error(
          "checkpoint at round {} not written: {}; a restart resumes from the last one "
          "written",
          core.round(), e.what());
      checkpoint_failed = true;
    }
    return !checkpoint_failed;
  };

  uint64_t csv_rows_lost = 0;
  bool any_round_closed = false;
  AuthCounters auth;
  telemetry::DaemonTelemetry tel(tel_opts, steadySeconds,
                                 coordinatorStatus(core, any_round_closed, "starting", auth));
  auto publish = [&](const std::string& state) {
    auto st = coordinatorStatus(core, any_round_closed, state, auth);
    tel.publish(st, systemdStatus(st));
  };
  // A closed round is written down (CSV, progress line, status) only after the messages of the
  // event that closed it have gone out: the next round starts without waiting for bookkeeping.
  std::vector<server::RoundRecord> closed_rounds;
  auto reportClosedRounds = [&] {
    if (closed_rounds.empty()) return;
    for (const auto& r : closed_rounds) {
      if (csv && !csv->write(r)) {
        // Training goes on; the record has a gap, said once and then every 100 rows lost.
        if (csv_rows_lost++ % 100 == 0) {
          spdlog::error("metrics CSV {}: cannot write the row of round {} ({} row(s) lost so far)",
                        s.metrics_csv, r.round, csv_rows_lost);
        }
      }
      if (spdlog::should_log(spdlog::level::info)) spdlog::info("{}", server::progressLine(r));
    }
    closed_rounds.clear();
    any_round_closed = true;
    publish("running");
  };

  zmq::context_t ctx(1);
  transport::ChannelOptions opts;
  opts.max_message_bytes = int64_t(s.max_message_bytes);
  auto zap = setUpSecurity(s.security, ctx, opts);
  transport::Channel channel(ctx, zmq::socket_type::router, opts);
  transport::HandshakeMonitor handshakes(ctx, channel.socket());
  std::vector<zmq::socket_t*> also_wake_on{&handshakes.socket()};
  if (zap) also_wake_on.push_back(&zap->socket());
  std::string endpoint;
  try {
    endpoint = channel.bind(s.bind);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot listen on " + s.bind + ": " + e.what());
  }
  spdlog::info("coordinator listening on {} (session {:x}, {} parameters, waiting for {} workers)",
               endpoint, session, core.parameters().size(), s.min_workers);
  if (!s.endpoint_file.empty()) writeFileAtomically(s.endpoint_file, endpoint + '\n');
  tel.ready("listening on " + endpoint);
  publish("waiting");

  // received_at: when the message these answer was received (acks carry the time held since).
  auto dispatch = [&](server::Effects effects, std::optional<double> received_at = {}) {
    // Evaluations run here, on the protocol thread, between two events: the watchdog is pinged
    // between chunks of rows (a large test set on a small board can outlast WatchdogSec).
    effects = server::evaluateInline(core, std::move(effects), test.get(), steadySeconds,
                                     [&tel] { tel.tick(); });
    for (auto& r : effects.closed_rounds) closed_rounds.push_back(std::move(r));
    // The closed rounds' metrics rows go out first and the checkpoint next, both before the
    // messages of the event that made them due: no worker is told of a round's result that a
    // crash right after could lose, and a crash between row and checkpoint redoes rounds whose
    // rows exist rather than leaving a round without one.
    reportClosedRounds();
    if (effects.checkpoint_due) saveCheckpoint();
    for (auto& o : effects.messages) {
      if (received_at) server::stampAckHold(o.message, *received_at, steadySeconds());
      if (!transport::sendMessage(channel, o.peer, o.message)) {
        spdlog::debug("could not send to a peer (gone or queue full)");
      }
    }
  };
  double last_reject_log = 0.0;
  uint64_t last_rejected = 0;
  double last_auth_log = -1e9;
  uint64_t last_auth_refused = 0;
  std::string last_refusal;
  // Admissions and refusals of connections; refusals are logged at most once per interval.
  auto serveSecurity = [&] {
    if (zap) {
      for (const auto& v : zap->serve()) {
        if (v.admitted) {
          spdlog::info("admitted worker key {} ({}) from {}", v.public_key, v.label, v.address);
        } else {
          last_refusal = fmt::format(
              "key {} from {}: {}", v.public_key.empty() ? "-" : v.public_key, v.address, v.reason);
        }
      }
      auth.admitted = zap->admitted();
      auth.refused = zap->refused();
    }
    for (const auto& e : handshakes.drain()) {
      if (e.kind == transport::HandshakeEvent::Kind::failed) {
        ++auth.handshake_failed;
        last_refusal = fmt::format(
            "a handshake on {} failed (security mode or keys differ, or a port check "
            "that connected and closed; libzmq does not say the peer's address)",
            e.endpoint);
      }
    }
    const uint64_t refusals = auth.refused + auth.handshake_failed;
    double now = steadySeconds();
    if (refusals != last_auth_refused && now - last_auth_log > 10.0) {
      spdlog::warn(
          "refused {} connection(s) so far (auth_refused={} handshake_failed={}); last: {}",
          refusals, auth.refused, auth.handshake_failed, last_refusal);
      last_auth_refused = refusals;
      last_auth_log = now;
    }
  };
  // At most kMaxMessagesPerTurn before the timers run: a steady stream of messages (junk
  // included) must not hold back round deadlines, heartbeats or the watchdog. The rest stays
  // queued, and the next wait returns at once. Stops early when the run finishes.
  auto takeMessages = [&] {
    const bool was_finished = core.finished();
    size_t taken = 0;
    while (taken++ < transport::kMaxMessagesPerTurn) {
      auto frames = channel.receive();
      if (!frames) break;
      double at = steadySeconds();
      auto parsed = transport::parseFrames(*frames);
      if (!parsed.message) {
        spdlog::debug("malformed message: {}", parsed.error);
        dispatch(core.handleMalformed(frames->peer, parsed.reason, steadySeconds()));
        continue;
      }
      dispatch(
          core.handleMessage(frames->peer, *parsed.message, frames->bytes, at, steadySeconds()),
          at);
      if (!was_finished && core.finished()) break;
    }
  };
  if (resumed && core.finished()) {
    // The workers of the run may still be waiting for it (a checkpoint at or past max_rounds
    // taken mid-run, or workers restarted after the end): for as long as a worker may stay
    // silent, every message is answered SHUTTING_DOWN, and each worker that asks finishes
    // instead of re-joining forever.
    const double until =
        steadySeconds() + std::max(s.worker_patience_seconds, s.round_deadline_seconds);
    while (steadySeconds() < until && !stopRequested()) {
      tel.tick();
      // `also_wake_on` (the ZAP and monitor sockets) wakes the wait without the ROUTER being
      // readable: the handshakes must be served on every pass, or no CURVE worker gets in to be
      // told, and the ZAP request left unread makes every wait return at once.
      const bool readable = channel.waitReadable(std::chrono::milliseconds(100), also_wake_on);
      serveSecurity();
      if (reloadRequested().exchange(false)) reloadAllowlist(zap.get());
      if (readable) takeMessages();
    }
  }
  while (!core.finished() && !stopRequested()) {
    double wait = std::clamp(core.nextTimeout(steadySeconds()) - steadySeconds(), 0.0, 0.1);
    bool readable = channel.waitReadable(std::chrono::milliseconds(int(wait * 1000)), also_wake_on);
    serveSecurity();
    if (reloadRequested().exchange(false)) reloadAllowlist(zap.get());
    if (readable) takeMessages();
    dispatch(core.handleTimeout(steadySeconds()));
    tel.tick();
    if (tel.publishDue()) publish(any_round_closed ? "running" : "waiting");
    double now = steadySeconds();
    if (now - last_reject_log > 10.0 && core.rejectedTotal() != last_rejected) {
      std::string reasons;
      for (const auto& [reason, n] : core.rejections()) reasons += fmt::format(" {}={}", reason, n);
      spdlog::warn("rejected messages so far:{}", reasons);
      last_rejected = core.rejectedTotal();
      last_reject_log = now;
    }
  }
  if (!core.finished() && !s.checkpoint.path.empty() && core.round() == 0) {
    // Nothing trained (stopped while loading, or waiting for min_workers): a checkpoint would
    // make the next start a resume, past min_workers and bound to this model.
    spdlog::info(
        "stop requested before any round: no checkpoint written; workers wait for a "
        "restart");
  } else if (!core.finished() && !s.checkpoint.path.empty()) {
    // With checkpoints a stop is a pause: the workers keep waiting and re-join the restarted
    // coordinator on their own.
    if (saveCheckpoint()) {
      spdlog::info("stop requested: checkpoint written at round {}; workers wait for a restart",
                   core.round());
    }
  } else if (!core.finished()) {
    spdlog::info("stop requested: telling workers to finish");
    dispatch(core.handleStop(steadySeconds()));
  }
  if (!core.finishAcknowledged()) {
    // A Finish carries the last round's update, seconds of bytes on a slow downlink, and what of
    // it is still queued when the process ends is lost (libzmq's linger covers only its own
    // queue; the kernel resets a connection closed with a peer's bytes unread). Each worker
    // answers its Finish with a Leave; until all have, or a round's deadline (1 to 20 s: the
    // unit allows 30 s to stop) has passed, messages are taken and answered.
    const double wait = std::clamp(s.round_deadline_seconds, 1.0, 20.0);
    const double until = steadySeconds() + wait;
    spdlog::info("waiting up to {:g} s for {} worker(s) to confirm the end of training", wait,
                 core.finishUnacknowledged());
    publish("finishing");
    while (!core.finishAcknowledged() && steadySeconds() < until) {
      tel.tick();
      serveSecurity();
      if (channel.waitReadable(std::chrono::milliseconds(50), also_wake_on)) takeMessages();
    }
    if (!core.finishAcknowledged()) {
      spdlog::warn(
          "{} worker(s) did not confirm within {:g} s that the end of training reached them "
          "(gone, or a slow link): they may not have the final model",
          core.finishUnacknowledged(), wait);
    }
  }
  publish(core.finished() ? "finished" : "stopped");
  tel.stopping(systemdStatus(coordinatorStatus(core, any_round_closed, "stopping", auth)));
  std::cout << "model: round=" << core.round() << " checksum=" << std::hex
            << checksum(core.parameters()) << std::dec << std::endl;
  // Every refused message, by reason, over the whole run (a resumed run includes the earlier part).
  std::string reasons;
  for (const auto& [reason, n] : core.rejections()) reasons += fmt::format(" {}={}", reason, n);
  std::cout << "rejections: total=" << core.rejectedTotal() << reasons << std::endl;
  std::cout << "connections: admitted=" << auth.admitted << " auth_refused=" << auth.refused
            << " handshake_failed=" << auth.handshake_failed << std::endl;
  // Rounds closed (a resumed run counts the earlier part); bytes up to now, pushes of a round
  // left open included.
  std::cout << server::finalLine(core.round(), core.accuracy(), core.uploadBytes(),
                                 core.fullBytes())
            << std::endl;
  // The last checkpoint could not be written: a restart would redo rounds, so say so. A finished
  // run's (3) is not for a restart, which would resume the older checkpoint and wait for
  // workers that were told training is over.
  if (!checkpoint_failed) return 0;
  return core.finished() ? 3 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto command = server::coordinatorCommandLine(argc, argv);
    if (const int* rc = std::get_if<int>(&command)) return *rc;
    auto& run = std::get<server::CoordinatorRun>(command);
    return runCoordinator(std::move(run.settings), run.telemetry);
  } catch (const config::ConfigError& e) {
    std::cerr << "tern-coordinator: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tern-coordinator: " << e.what() << '\n';
    return 1;
  }
}
