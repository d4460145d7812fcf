// tern-coordinator: the daemon around CoordinatorCore. It owns the ROUTER socket, the poll loop,
// signals and files; every protocol decision is the core's.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "common/config/yaml_reader.hpp"
#include "common/ml/data_source.hpp"
#include "common/transport/framing.hpp"
#include "common/util/checksum.hpp"
#include "common/util/signals.hpp"
#include "common/util/steady_clock.hpp"
#include "server/allocate_command.hpp"
#include "server/checkpoint_file.hpp"
#include "server/coordinator_core.hpp"
#include "server/metrics_csv.hpp"

using namespace tern;

namespace {

int runCoordinator(config::CoordinatorSettings s) {
  spdlog::set_level(spdlog::level::from_str(s.logging.level));
  std::shared_ptr<const ml::Dataset> test;
  if (!s.test_data.format.empty()) {
    test = std::make_shared<ml::Dataset>(ml::loadDataset(s.test_data));
    if (s.model.features == 0) s.model.features = uint32_t(test->features());
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
  if (!s.checkpoint.path.empty()) {
    if (auto bytes = server::readFileIfExists(s.checkpoint.path)) {
      try {
        core_ptr = server::CoordinatorCore::restore(s, std::move(model), test, session,
                                                    steadySeconds, *bytes);
      } catch (const std::exception& e) {
        throw std::runtime_error(s.checkpoint.path + ": " + e.what());
      }
      spdlog::info("resumed from checkpoint {} at round {}", s.checkpoint.path,
                   core_ptr->round());
    }
  }
  if (!core_ptr) {
    core_ptr = std::make_unique<server::CoordinatorCore>(s, std::move(model), test, session,
                                                         steadySeconds);
  }
  server::CoordinatorCore& core = *core_ptr;
  auto saveCheckpoint = [&] {
    if (s.checkpoint.path.empty()) return;
    server::writeFileAtomically(s.checkpoint.path, core.checkpoint());
    core.checkpointWritten();
    spdlog::debug("checkpoint written at round {}", core.round());
  };

  std::unique_ptr<server::MetricsCsv> csv;
  if (!s.metrics_csv.empty()) csv = std::make_unique<server::MetricsCsv>(s.metrics_csv);
  core.on_round = [&](const server::RoundRecord& r) {
    if (csv) csv->write(r);
    spdlog::info("{}", server::progressLine(r));
  };

  zmq::context_t ctx(1);
  transport::ChannelOptions opts;
  opts.max_message_bytes = int64_t(s.max_message_bytes);
  transport::Channel channel(ctx, zmq::socket_type::router, opts);
  std::string endpoint = channel.bind(s.bind);
  spdlog::info("coordinator listening on {} (session {:x}, {} parameters, waiting for {} workers)",
               endpoint, session, core.parameters().size(), s.min_workers);
  if (!s.endpoint_file.empty()) {
    std::string tmp = s.endpoint_file + ".tmp";
    std::ofstream(tmp) << endpoint << '\n';
    std::filesystem::rename(tmp, s.endpoint_file);
  }
  installSignalHandlers();

  auto dispatch = [&](std::vector<Outgoing> out) {
    // The checkpoint goes to disk before the messages of the event that made it due: no worker
    // is told of a round's result that a crash right after could lose.
    if (core.checkpointDue()) saveCheckpoint();
    for (auto& o : out) {
      if (!transport::sendMessage(channel, o.peer, o.message)) {
        spdlog::debug("could not send to a peer (gone or queue full)");
      }
    }
  };
  double last_reject_log = 0.0;
  uint64_t last_rejected = 0;
  while (!core.finished() && !stopRequested()) {
    double wait = std::clamp(core.nextWakeup() - steadySeconds(), 0.0, 0.1);
    if (channel.waitReadable(std::chrono::milliseconds(int(wait * 1000)))) {
      while (auto frames = channel.receive()) {
        double at = steadySeconds();
        auto parsed = transport::parseFrames(*frames);
        if (!parsed.message) {
          dispatch(core.onMalformed(frames->peer, parsed.error));
          continue;
        }
        dispatch(core.onMessage(frames->peer, *parsed.message, frames->bytes, at));
        if (core.finished()) break;
      }
    }
    dispatch(core.onTick());
    double now = steadySeconds();
    if (now - last_reject_log > 10.0 && core.rejectedTotal() != last_rejected) {
      std::string reasons;
      for (const auto& [reason, n] : core.rejections()) reasons += fmt::format(" {}={}", reason, n);
      spdlog::warn("rejected messages so far:{}", reasons);
      last_rejected = core.rejectedTotal();
      last_reject_log = now;
    }
  }
  if (!core.finished() && !s.checkpoint.path.empty()) {
    // With checkpoints a stop is a pause: the workers keep waiting and re-join the restarted
    // coordinator on their own.
    saveCheckpoint();
    spdlog::info("stop requested: checkpoint written at round {}; workers wait for a restart",
                 core.round());
  } else if (!core.finished()) {
    spdlog::info("stop requested: telling workers to finish");
    dispatch(core.stop());
  }
  if (core.checkpointDue()) saveCheckpoint();
  std::cout << "model: round=" << core.round() << " checksum=" << std::hex
            << checksum(core.parameters()) << std::dec << std::endl;
  std::cout << server::finalLine(core.lastRecord()) << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern coordinator: aggregates compressed gradients from tern workers"};
  app.set_version_flag("--version", std::string("tern-coordinator ") + TERN_VERSION);
  std::string config_file, metrics_csv, bind, endpoint_file, log_level;
  uint64_t max_rounds = 0;
  uint32_t min_workers = 0;
  app.add_option("--config", config_file, "YAML configuration file");
  app.add_option("--metrics-csv", metrics_csv, "write one CSV row per round here");
  app.add_option("--bind", bind, "endpoint to bind (overrides 'bind')");
  app.add_option("--endpoint-file", endpoint_file, "write the bound endpoint here");
  app.add_option("--max-rounds", max_rounds, "overrides 'max_rounds'");
  app.add_option("--min-workers", min_workers, "overrides 'min_workers'");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  auto* allocate = app.add_subcommand("allocate", "print the allocation plan as JSON and exit");
  server::AllocateOptions alloc_opts;
  server::addAllocateOptions(*allocate, alloc_opts);
  CLI11_PARSE(app, argc, argv);

  try {
    if (*allocate) return server::runAllocate(alloc_opts);
    if (config_file.empty()) {
      std::cerr << "tern-coordinator: --config FILE is required (see --help)\n";
      return 2;
    }
    auto s = config::loadCoordinatorSettings(config_file);
    if (!metrics_csv.empty()) s.metrics_csv = metrics_csv;
    if (!bind.empty()) s.bind = bind;
    if (!endpoint_file.empty()) s.endpoint_file = endpoint_file;
    if (max_rounds) s.max_rounds = max_rounds;
    if (min_workers) s.min_workers = min_workers;
    if (!log_level.empty()) s.logging.level = log_level;
    return runCoordinator(std::move(s));
  } catch (const config::ConfigError& e) {
    std::cerr << "tern-coordinator: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tern-coordinator: " << e.what() << '\n';
    return 1;
  }
}
