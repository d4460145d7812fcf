#pragma once
// What a worker shows of itself: the /status and /metrics document (its own counters and link
// fit), from the core's statistics and the connection counters the daemon keeps.
#include <cstdint>
#include <optional>
#include <string>

#include "common/config/settings.hpp"
#include "common/telemetry/node_status.hpp"
#include "worker/external_trainer.hpp"
#include "worker/worker_core.hpp"

namespace tern::worker {

// The daemon's own counters: messages and connections, and its external trainer's (if any).
struct DaemonCounters {
  uint64_t malformed = 0;
  uint64_t auth_refused = 0;
  uint64_t handshake_failed = 0;
  std::optional<ExternalTrainerCounters> trainer;
};

// time_s: seconds since the first round; state: what the daemon is doing ("running", ...).
telemetry::NodeStatus workerStatus(const config::WorkerSettings& s, const WorkerCore& core,
                                   const DaemonCounters& daemon, double time_s,
                                   const std::string& state);

}  // namespace tern::worker
