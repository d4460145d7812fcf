// tern-sim: runs the coordinator and worker cores in one process on a virtual clock.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/config/command_line.hpp"
#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"
#include "server/metrics_csv.hpp"
#include "sim/simulator.hpp"

using namespace tern;

int main(int argc, char** argv) {
  CLI::App app{"tern simulator: the real coordinator and worker cores over modelled links"};
  app.set_version_flag("--version", std::string("tern-sim ") + TERN_VERSION);
  std::string config_file, metrics_csv, log_level;
  uint64_t max_rounds = 0;
  uint32_t workers = 0;
  app.add_option("--config", config_file, "YAML configuration file")->required();
  app.add_option("--metrics-csv", metrics_csv, "write one CSV row per round here");
  app.add_option("--max-rounds", max_rounds, "overrides coordinator.max_rounds")
      ->check(CLI::Range(uint64_t{1}, config::kMaxRounds));
  app.add_option("--workers", workers, "overrides 'workers'")
      ->check(CLI::Range(uint32_t{1}, config::kMaxWorkers));
  config::addLogLevelOption(app, log_level);
  if (auto rc = config::parseCommandLine(app, argc, argv)) return *rc;
  try {
    auto s = config::loadSimSettings(config_file);
    if (!metrics_csv.empty()) s.metrics_csv = metrics_csv;
    if (max_rounds) s.coordinator.max_rounds = max_rounds;
    if (workers) config::setSimWorkers(s, workers);
    if (!log_level.empty()) s.coordinator.logging.level = log_level;
    spdlog::set_level(spdlog::level::from_str(s.coordinator.logging.level));
    std::unique_ptr<server::MetricsCsv> csv;
    if (!s.metrics_csv.empty()) csv = std::make_unique<server::MetricsCsv>(s.metrics_csv);
    sim::Simulator simulator(s);
    auto result = simulator.run([&](const server::RoundRecord& r) {
      if (csv && !csv->write(r)) {
        throw std::runtime_error(s.metrics_csv + ": cannot write the row of round " +
                                 std::to_string(r.round));
      }
      if (r.evaluated) std::cout << server::progressLine(r) << '\n';
    });
    std::cout << "simulated " << result.virtual_seconds << " s in " << result.events
              << " events; replicas differing from the coordinator: " << result.replica_mismatches
              << '\n';
    if (csv) std::cout << "metrics CSV: " << s.metrics_csv << '\n';
    const std::optional<double> accuracy =
        result.last.evaluated ? std::optional<double>(result.last.test_accuracy) : std::nullopt;
    std::cout << server::finalLine(
                     result.rounds, accuracy,
                     {result.last.upload_bytes, result.last.download_bytes, result.last.full_bytes})
              << std::endl;
    return result.replica_mismatches == 0 ? 0 : 3;
  } catch (const config::ConfigError& e) {
    std::cerr << "tern-sim: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tern-sim: " << e.what() << '\n';
    return 1;
  }
}
