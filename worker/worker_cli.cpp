#include "worker/worker_cli.hpp"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <string>

#include "common/config/command_line.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/telemetry/daemon_cli.hpp"

namespace tern::worker {

namespace {

// The flags given on the command line; empty or -1: not given.
struct Overrides {
  std::string config_file, coordinator, name, log_level;
  bool name_given = false;
  int shard_index = -1;
  telemetry::HttpFlags http;
};

std::variant<int, WorkerRun> loadRun(const Overrides& o) {
  auto s = config::loadWorkerSettings(o.config_file);
  if (!o.coordinator.empty()) {
    if (auto why = config::endpointProblem(o.coordinator, false); !why.empty())
      throw config::ConfigError("--coordinator " + why);
    s.coordinator = o.coordinator;
  }
  if (o.name_given) {
    if (auto why = config::workerNameProblem(o.name); !why.empty())
      throw config::ConfigError("--name " + why);
    s.name = o.name;
  }
  if (o.shard_index >= 0) {
    if (size_t(o.shard_index) >= s.shard_total) {
      std::cerr << "tern-worker: --shard-index must be below data.shard.total\n";
      return 2;
    }
    s.shard_index = size_t(o.shard_index);
  }
  if (!o.log_level.empty()) s.logging.level = o.log_level;
  auto tel = telemetry::telemetryOptions(s.http, o.http);
  return WorkerRun{std::move(s), std::move(tel)};
}

}  // namespace

std::variant<int, WorkerRun> workerCommandLine(int argc, char** argv) {
  CLI::App app{"tern worker: trains on its local shard and pushes compressed gradients"};
  app.set_version_flag("--version", std::string("tern-worker ") + TERN_VERSION);
  Overrides o;
  telemetry::KeygenCommand keygen;
  app.add_option(
      "--config", o.config_file,
      std::string("YAML configuration file (default ") + config::kDefaultWorkerConfig + ")");
  app.add_option("--coordinator", o.coordinator, "coordinator endpoint (overrides 'coordinator')");
  auto* name_option = app.add_option("--name", o.name, "worker name (overrides 'name')");
  app.add_option("--shard-index", o.shard_index, "overrides data.shard.index")
      ->check(CLI::Range(0, int(config::kMaxWorkers) - 1));
  config::addLogLevelOption(app, o.log_level);
  telemetry::addHttpFlags(app, o.http);
  telemetry::addKeygenCommand(app, keygen);
  if (auto rc = config::parseCommandLine(app, argc, argv)) return *rc;
  if (keygen.chosen()) return keygen.run();
  if (o.config_file.empty()) {
    o.config_file = config::kDefaultWorkerConfig;
    if (!std::filesystem::exists(o.config_file)) {
      std::cerr << "tern-worker: no --config FILE given and " << o.config_file
                << " does not exist (see --help)\n";
      return 2;
    }
  }
  o.name_given = bool(*name_option);
  return loadRun(o);
}

}  // namespace tern::worker
