// tern-loadgen: many protocol-complete workers that do not train, in one process, against one
// coordinator (see load_fleet.hpp). The worker YAML gives the data (whose row count and labels
// each worker reports), the keys and the push settings.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/config/command_line.hpp"
#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/daemon/signals.hpp"
#include "common/ml/data_source.hpp"
#include "tools/loadgen/load_fleet.hpp"

using namespace tern;

namespace {

// Two descriptors a worker (its TCP connection and its socket's mailbox): the soft limit goes to
// the hard one, and a fleet that still does not fit is refused up front.
bool raiseFileLimit(size_t workers) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return true;
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= 2 * workers + 64) return true;
  std::cerr << "tern-loadgen: " << workers << " workers need about " << 2 * workers + 64
            << " file descriptors; the limit is " << r.rlim_cur << " (ulimit -n)\n";
  return false;
}

void print(const loadgen::FleetSummary& s) {
  std::cout << "loadgen: workers=" << s.workers << " joined=" << s.joined
            << " rounds_answered=" << s.pushes << " min_rounds_per_worker=" << s.min_pushes
            << " rounds_seen=" << s.rounds_seen << " round_ms_median=" << s.round_ms_median
            << " round_ms_mean=" << s.round_ms_mean << " seconds=" << s.seconds << std::endl;
}

int run(const std::string& config_file, const std::string& coordinator, loadgen::FleetOptions f) {
  auto s = config::loadWorkerSettings(config_file);
  if (!coordinator.empty()) {
    if (auto why = config::endpointProblem(coordinator, false); !why.empty())
      throw config::ConfigError("--coordinator " + why);
    s.coordinator = coordinator;
  }
  if (!raiseFileLimit(f.workers)) return 2;
  daemon::installSignalHandlers();
  spdlog::set_level(spdlog::level::from_str(s.logging.level));
  uint64_t partition = 0;
  auto shard = std::make_shared<ml::Dataset>(
      ml::loadShardOf(s.data, s.shard_index, s.shard_total, s.partition, &partition));
  loadgen::LoadFleet fleet(s, shard, partition, f);
  print(fleet.run());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern load generator: N workers that answer their rounds with seeded noise"};
  std::string config_file, coordinator;
  loadgen::FleetOptions f;
  app.add_option("--config", config_file, "worker YAML: data, keys and push settings")->required();
  app.add_option("--coordinator", coordinator, "coordinator endpoint (overrides 'coordinator')");
  app.add_option("--workers", f.workers, "workers to run")
      ->check(CLI::Range(size_t{1}, size_t(config::kMaxWorkers)));
  app.add_option("--rounds", f.rounds,
                 "stop after each worker pushed this many rounds (0: until Finish)");
  app.add_option("--scale", f.scale, "standard deviation of the noise pushed (default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", f.seed, "seed of the noise and the instances");
  app.add_option("--name-prefix", f.prefix, "worker i is named PREFIX-i (default load)");
  try {
    if (auto rc = config::parseCommandLine(app, argc, argv)) return *rc;
    return run(config_file, coordinator, f);
  } catch (const config::ConfigError& e) {
    std::cerr << "tern-loadgen: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tern-loadgen: " << e.what() << '\n';
    return 1;
  }
}
