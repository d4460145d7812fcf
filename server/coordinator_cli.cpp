#include "server/coordinator_cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>

#include "common/config/command_line.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/telemetry/daemon_cli.hpp"
#include "common/telemetry/status_table.hpp"
#include "server/allocate_command.hpp"

namespace tern::server {

namespace {

// The flags given on the command line; zero or empty: not given.
struct Overrides {
  std::string config_file, metrics_csv, bind, endpoint_file, log_level;
  uint64_t max_rounds = 0;
  uint32_t min_workers = 0;
  telemetry::HttpFlags http;
};

CoordinatorRun loadRun(const Overrides& o) {
  auto s = config::loadCoordinatorSettings(o.config_file);
  config::requireModelFeatures(s);
  if (!o.metrics_csv.empty()) s.metrics_csv = o.metrics_csv;
  if (!o.bind.empty()) {
    if (auto why = config::endpointProblem(o.bind, true); !why.empty())
      throw config::ConfigError("--bind " + why);
    s.bind = o.bind;
  }
  if (!o.endpoint_file.empty()) s.endpoint_file = o.endpoint_file;
  if (o.max_rounds) s.max_rounds = o.max_rounds;
  if (o.min_workers) s.min_workers = o.min_workers;
  if (!s.max_workers_given) s.max_workers = std::max(s.max_workers, s.min_workers);
  if (s.min_workers > s.max_workers) {
    throw config::ConfigError("--min-workers " + std::to_string(s.min_workers) +
                              " is more than max_workers (" + std::to_string(s.max_workers) + ")");
  }
  if (!o.log_level.empty()) s.logging.level = o.log_level;
  auto tel = telemetry::telemetryOptions(s.http, o.http);
  return {std::move(s), std::move(tel)};
}

}  // namespace

std::variant<int, CoordinatorRun> coordinatorCommandLine(int argc, char** argv) {
  CLI::App app{"tern coordinator: aggregates compressed gradients from tern workers"};
  app.set_version_flag("--version", std::string("tern-coordinator ") + TERN_VERSION);
  Overrides o;
  telemetry::KeygenCommand keygen;
  app.add_option(
      "--config", o.config_file,
      std::string("YAML configuration file (default ") + config::kDefaultCoordinatorConfig + ")");
  app.add_option("--metrics-csv", o.metrics_csv, "write one CSV row per round here");
  app.add_option("--bind", o.bind, "endpoint to bind (overrides 'bind')");
  app.add_option("--endpoint-file", o.endpoint_file, "write the bound endpoint here");
  // The YAML keys' ranges: a value outside them is a bad command line (exit 2), not ignored.
  app.add_option("--max-rounds", o.max_rounds, "overrides 'max_rounds'")
      ->check(CLI::Range(uint64_t{1}, config::kMaxRounds));
  app.add_option("--min-workers", o.min_workers, "overrides 'min_workers'")
      ->check(CLI::Range(uint32_t{1}, config::kMaxWorkers));
  config::addLogLevelOption(app, o.log_level);
  telemetry::addHttpFlags(app, o.http);
  auto* status = app.add_subcommand("status", "print a running daemon's /status as a table");
  std::string status_url;
  bool status_json = false;
  status->add_option("--url", status_url, "http://HOST:PORT of a coordinator or worker")
      ->required();
  status->add_flag("--json", status_json, "print the raw JSON document");
  auto* allocate = app.add_subcommand("allocate", "print the allocation plan as JSON and exit");
  AllocateOptions alloc_opts;
  addAllocateOptions(*allocate, alloc_opts);
  telemetry::addKeygenCommand(app, keygen);
  if (auto rc = config::parseCommandLine(app, argc, argv)) return *rc;

  if (keygen.chosen()) return keygen.run();
  if (*allocate) return runAllocate(alloc_opts);
  if (*status)
    return telemetry::runStatusCommand(status_url, status_json, 5.0, std::cout, std::cerr);
  if (o.config_file.empty()) {
    o.config_file = config::kDefaultCoordinatorConfig;
    if (!std::filesystem::exists(o.config_file)) {
      std::cerr << "tern-coordinator: no --config FILE given and " << o.config_file
                << " does not exist (see --help)\n";
      return 2;
    }
  }
  return loadRun(o);
}

}  // namespace tern::server
