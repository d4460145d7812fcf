#pragma once
// What a worker shows of itself: the /status and /metrics document (its own counters and link
// fit), from the core's statistics and the connection counters the daemon keeps.
#include <cstdint>
#include <string>

#include "common/config/settings.hpp"
#include "common/telemetry/node_status.hpp"
#include "worker/worker_core.hpp"

namespace tern::worker {

// time_s: seconds since the first round; state: what the daemon is doing ("running", ...).
telemetry::NodeStatus workerStatus(const config::WorkerSettings& s, const WorkerCore& core,
                                   uint64_t malformed, uint64_t auth_refused,
                                   uint64_t handshake_failed, double time_s,
                                   const std::string& state);

}  // namespace tern::worker
