// tern-worker: the daemon around WorkerCore. It loads its data (or waits for its external
// trainer's Hello), owns the DEALER socket and the poll loop, carries the core's effects out and
// computes its gradient requests on the loop's background job; every protocol decision is the
// core's.
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <variant>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/daemon/logging.hpp"
#include "common/daemon/signals.hpp"
#include "common/ml/data_source.hpp"
#include "worker/external_trainer.hpp"
#include "worker/worker_cli.hpp"
#include "worker/worker_daemon.hpp"

using namespace tern;
using daemon::stopRequested;

namespace {

void stoppedWhileLoading() {
  spdlog::info("stopped while loading the data: not joining");
  spdlog::default_logger()->flush();
}

// With an external trainer: no data here; the trainer's Hello says what it trains.
int runExternal(const config::WorkerSettings& s, const telemetry::TelemetryOptions& tel_opts) {
  auto trainer = std::make_unique<worker::ExternalTrainer>(s.trainer, int64_t(s.max_message_bytes));
  spdlog::info("waiting for the trainer at {}", trainer->endpoint());
  auto data = trainer->waitForHello([] { return stopRequested().load(); });
  if (!data) {
    spdlog::info("stopped while waiting for the trainer: not joining");
    return 0;
  }
  worker::WorkerDaemon worker_daemon(s, tel_opts, std::move(*data), nullptr, std::move(trainer));
  return worker_daemon.run();
}

// The built-in trainer's rows: its shard of the shared data set (the partition fingerprint in
// `partition`), or with data.mode local the whole file, this device's own (no fingerprint).
std::shared_ptr<const ml::Dataset> loadTrainData(const config::WorkerSettings& s,
                                                 uint64_t& partition) {
  const bool local = s.data_mode == "local";
  auto shard = std::make_shared<ml::Dataset>(daemon::exitIfStoppedDuring(
      [&] {
        if (local) return ml::loadDataset(s.data);
        return ml::loadShardOf(s.data, s.shard_index, s.shard_total, s.partition, &partition);
      },
      stoppedWhileLoading));
  if (local) {
    spdlog::info("local data: {} rows, {} features", shard->rows(), shard->features());
  } else {
    spdlog::info("shard {}/{}: {} rows, {} features", s.shard_index, s.shard_total, shard->rows(),
                 shard->features());
  }
  return shard;
}

std::shared_ptr<const ml::Dataset> loadEvalData(const config::WorkerSettings& s,
                                                const ml::Dataset& train) {
  if (s.eval_data.format.empty()) return nullptr;
  auto eval = std::make_shared<ml::Dataset>(daemon::exitIfStoppedDuring(
      [&] { return ml::loadDataset(s.eval_data); }, stoppedWhileLoading));
  if (eval->features() != train.features()) {
    throw std::runtime_error("data.eval has " + std::to_string(eval->features()) +
                             " features, the training data " + std::to_string(train.features()));
  }
  spdlog::info("held-out data: {} rows", eval->rows());
  return eval;
}

// A hard threshold of 0 sends every coordinate: the coordinator's caps do not limit it (they
// bound the sparsifiers' counts), only a threshold it sends (allocation.method dagc-a) does.
void warnIfUncapped(const compression::CompressorSpec& c) {
  if (c.name != "threshold" || c.threshold > 0.0) return;
  spdlog::warn(
      "compression threshold with compression.threshold 0 sends every coordinate until the "
      "coordinator sends a threshold (allocation.method dagc-a): its caps do not limit it");
}

int runWorker(const config::WorkerSettings& s, const telemetry::TelemetryOptions& tel_opts) {
  // First: a stop requested while the data loads is honoured by the loop, not by a kill.
  daemon::installSignalHandlers();
  daemon::configureLogging(s.logging.level, s.logging.json, "worker", s.name);
  warnIfUncapped(s.compressor);
  if (s.trainer.external()) return runExternal(s, tel_opts);
  uint64_t partition = 0;
  auto shard = loadTrainData(s, partition);
  auto eval = loadEvalData(s, *shard);
  malloc_trim(0);
  auto data = worker::localDataOf(shard);
  data.eval_rows = eval ? eval->rows() : 0;
  worker::WorkerDaemon worker_daemon(s, tel_opts, std::move(data), std::move(eval), nullptr);
  // Workers of one shared data set must agree on its partition; local data have none.
  if (s.data_mode != "local") worker_daemon.core().setPartition(partition);
  if (stopRequested()) stoppedWhileLoading();
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
