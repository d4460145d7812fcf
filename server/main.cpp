// tern-coordinator: the daemon around CoordinatorCore. It owns the ROUTER socket, the poll loop,
// signals and files; every protocol decision is the core's.
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <variant>

#include "common/config/yaml_reader.hpp"
#include "common/daemon/logging.hpp"
#include "common/daemon/signals.hpp"
#include "server/coordinator_cli.hpp"
#include "server/coordinator_daemon.hpp"
#include "server/coordinator_startup.hpp"

using namespace tern;

namespace {

int runCoordinator(config::CoordinatorSettings s, const telemetry::TelemetryOptions& tel_opts) {
  // First: a stop requested while the data loads is honoured by the loop, not by a kill.
  daemon::installSignalHandlers();
  daemon::configureLogging(s.logging.level, s.logging.json, "coordinator", "");
  // libprotobuf logs a line for every hostile envelope it fails to parse (e.g. invalid UTF-8):
  // a flood of bad input would become a flood of log lines. Those messages are refused, counted
  // by reason and logged at a bounded rate by the loop instead.
  google::protobuf::SetLogHandler(nullptr);
  auto test = server::loadTestData(s);  // gives the model its width when the YAML does not
  auto started = server::startCore(s, test != nullptr);
  server::CoordinatorDaemon coordinator(s, *started.core, test.get(), started.resumed, tel_opts,
                                        started.fell_back);
  return coordinator.run();
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
