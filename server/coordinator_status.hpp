#pragma once
// What the coordinator shows of itself: the /status and /metrics document and systemd's STATUS=
// line, built from the core's last closed round and the connection counters.
#include <cstdint>
#include <string>

#include "common/config/settings.hpp"
#include "common/telemetry/node_status.hpp"
#include "server/coordinator_core.hpp"

namespace tern::server {

// Connections refused before any message was exchanged (the ZAP handler and failed handshakes).
struct AuthCounters {
  uint64_t admitted = 0;
  uint64_t refused = 0;           // CURVE key not on the allowlist
  uint64_t handshake_failed = 0;  // e.g. a plaintext worker, or one with the wrong server key
  uint64_t guard_refused = 0;     // plaintext: closed by the frame guard for what they sent
};

// The last closed round as in the metrics CSV, plus what changed since (membership, rejections).
telemetry::NodeStatus coordinatorStatus(const config::CoordinatorSettings& s,
                                        const CoordinatorCore& core, bool any_round_closed,
                                        const std::string& state, const AuthCounters& auth);

// systemd's one-line STATUS= of a coordinator status.
std::string systemdStatus(const telemetry::NodeStatus& st);

}  // namespace tern::server
