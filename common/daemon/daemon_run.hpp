#pragma once
// What a daemon's command line resolves to when it is to run: its configuration with the
// flags' overrides applied, and its telemetry endpoint. A main parses argv into
// std::variant<int, DaemonRun<Settings>> (an exit status, or this) and runs it.
#include "common/telemetry/daemon_telemetry.hpp"

namespace tern::daemon {

template <class Settings>
struct DaemonRun {
  Settings settings;
  telemetry::TelemetryOptions telemetry;
};

}  // namespace tern::daemon
