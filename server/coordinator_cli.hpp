#pragma once
// tern-coordinator's command line: the flags that override the YAML, and the subcommands that run
// to completion on their own (status, allocate, keygen).
#include <variant>

#include "common/config/settings.hpp"
#include "common/daemon/daemon_run.hpp"

namespace tern::server {

// A coordinator to run.
using CoordinatorRun = daemon::DaemonRun<config::CoordinatorSettings>;

// Parses argv. An exit status when nothing more is to run (--help, a bad command line: 2, a
// subcommand that ran); otherwise the run. Throws config::ConfigError for a bad configuration.
std::variant<int, CoordinatorRun> coordinatorCommandLine(int argc, char** argv);

}  // namespace tern::server
