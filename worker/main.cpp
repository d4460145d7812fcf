// tern-worker: the daemon around WorkerCore. It loads its shard, owns the DEALER socket, the poll
// loop and signals; every protocol decision is the core's.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "common/config/yaml_reader.hpp"
#include "common/ml/data_source.hpp"
#include "common/transport/framing.hpp"
#include "common/util/checksum.hpp"
#include "common/util/signals.hpp"
#include "common/util/steady_clock.hpp"
#include "worker/worker_core.hpp"

using namespace tern;

namespace {

int runWorker(const config::WorkerSettings& s) {
  spdlog::set_level(spdlog::level::from_str(s.logging.level));
  spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [{}] [%l] %v", s.name));
  auto full = ml::loadDataset(s.data);
  auto shard = std::make_shared<ml::Dataset>(
      ml::loadShard(full, s.shard_index, s.shard_total, s.partition));
  full = ml::Dataset();
  spdlog::info("shard {}/{}: {} rows, {} features", s.shard_index, s.shard_total, shard->rows(),
               shard->features());
  worker::WorkerCore core(s, shard, steadySeconds);

  zmq::context_t ctx(1);
  transport::ChannelOptions opts;
  opts.max_message_bytes = int64_t(s.max_message_bytes);
  transport::Channel channel(ctx, zmq::socket_type::dealer, opts);
  channel.connect(s.coordinator);
  installSignalHandlers();

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
  dispatch(core.start());
  uint64_t malformed = 0;
  while (!core.finished() && !stopRequested()) {
    double wait = std::clamp(core.nextWakeup() - steadySeconds(), 0.0, 0.1);
    if (channel.waitReadable(std::chrono::milliseconds(int(wait * 1000)))) {
      while (auto frames = channel.receive()) {
        auto parsed = transport::parseFrames(*frames);
        if (!parsed.message) {
          ++malformed;
          spdlog::warn("malformed message from the coordinator ({} so far): {}", malformed,
                       parsed.error);
          continue;
        }
        dispatch(core.onMessage(*parsed.message, frames->bytes));
      }
    }
    dispatch(core.onTick());
  }
  if (!core.finished() && core.joined()) {
    Message leave;
    leave.envelope = makeEnvelope();
    leave.envelope.mutable_leave()->set_worker_id(core.id());
    leave.envelope.mutable_leave()->set_session(core.session());
    leave.envelope.mutable_leave()->set_reason("stopped by signal");
    dispatch({leave});
  }
  auto fit = core.link().fit();
  spdlog::info("link model: a={:.3g}s b={:.3g}s/packet r2={:.3f} samples={}", fit.a, fit.b, fit.r2,
               fit.samples);
  std::cout << "replica: round=" << core.replicaRound() << " checksum=" << std::hex
            << checksum(core.parameters()) << std::dec << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern worker: trains on its local shard and pushes compressed gradients"};
  app.set_version_flag("--version", std::string("tern-worker ") + TERN_VERSION);
  std::string config_file, coordinator, name, log_level;
  int shard_index = -1;
  app.add_option("--config", config_file, "YAML configuration file");
  app.add_option("--coordinator", coordinator, "coordinator endpoint (overrides 'coordinator')");
  app.add_option("--name", name, "worker name (overrides 'name')");
  app.add_option("--shard-index", shard_index, "overrides data.shard.index");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  CLI11_PARSE(app, argc, argv);
  try {
    if (config_file.empty()) {
      std::cerr << "tern-worker: --config FILE is required (see --help)\n";
      return 2;
    }
    auto s = config::loadWorkerSettings(config_file);
    if (!coordinator.empty()) s.coordinator = coordinator;
    if (!name.empty()) s.name = name;
    if (shard_index >= 0) {
      if (size_t(shard_index) >= s.shard_total) {
        std::cerr << "tern-worker: --shard-index must be below data.shard.total\n";
        return 2;
      }
      s.shard_index = size_t(shard_index);
    }
    if (!log_level.empty()) s.logging.level = log_level;
    return runWorker(s);
  } catch (const config::ConfigError& e) {
    std::cerr << "tern-worker: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tern-worker: " << e.what() << '\n';
    return 1;
  }
}
