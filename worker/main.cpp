// tern-worker: the daemon around WorkerCore. It loads its shard, owns the DEALER socket and the
// poll loop, carries the core's effects out and computes its gradient requests on the loop's
// background job; every protocol decision is the core's.
#include <spdlog/spdlog.h>

#include <iostream>
#include <variant>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/daemon/logging.hpp"
#include "common/daemon/signals.hpp"
#include "common/ml/data_source.hpp"
#include "worker/worker_cli.hpp"
#include "worker/worker_daemon.hpp"

using namespace tern;
using daemon::stopRequested;

namespace {

int runWorker(const config::WorkerSettings& s, const telemetry::TelemetryOptions& tel_opts) {
  // First: a stop requested while the data loads is honoured by the loop, not by a kill.
  daemon::installSignalHandlers();
  daemon::configureLogging(s.logging.level, s.logging.json, "worker", s.name);
  uint64_t partition = 0;
  auto shard = std::make_shared<ml::Dataset>(daemon::exitIfStoppedDuring(
      [&] {
        return ml::loadShardOf(s.data, s.shard_index, s.shard_total, s.partition, &partition);
      },
      [] {
        spdlog::info("stopped while loading the data: not joining");
        spdlog::default_logger()->flush();
      }));
  spdlog::info("shard {}/{}: {} rows, {} features", s.shard_index, s.shard_total, shard->rows(),
               shard->features());
  worker::WorkerDaemon worker_daemon(s, tel_opts, shard);
  worker_daemon.core().setPartition(partition);
  if (stopRequested()) spdlog::info("stopped while loading the data: not joining");
  return worker_daemon.run();
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
