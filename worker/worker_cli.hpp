#pragma once
// tern-worker's command line: the flags that override the YAML, and the keygen subcommand.
#include <variant>

#include "common/config/settings.hpp"
#include "common/daemon/daemon_run.hpp"

namespace tern::worker {

// A worker to run.
using WorkerRun = daemon::DaemonRun<config::WorkerSettings>;

// Parses argv. An exit status when nothing more is to run (--help, a bad command line: 2,
// keygen); otherwise the run. Throws config::ConfigError for a bad configuration.
std::variant<int, WorkerRun> workerCommandLine(int argc, char** argv);

}  // namespace tern::worker
