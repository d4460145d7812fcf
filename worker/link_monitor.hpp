#pragma once
// The worker's view of its own uplink (issue: every worker measures its own link): it stamps
// each push and probe when handed to the socket, turns the matching ack into one transmission
// time (ack received - push sent - coordinator hold), feeds the online estimator, and asks for
// calibration probes at join and exploration probes when recent sizes cannot identify the slope.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/config/settings.hpp"
#include "common/costmodel/link_estimator.hpp"
#include "tern.pb.h"

namespace tern::worker {

class LinkMonitor {
 public:
  explicit LinkMonitor(const config::LinkSettings& settings);

  // Key of a push: its round; of a probe: its probe id (high bit set to keep them apart).
  static uint64_t pushKey(uint64_t round) { return round; }
  static uint64_t probeKey(uint64_t probe_id) { return probe_id | (1ull << 63); }

  void sent(uint64_t key, size_t wire_bytes, double now);
  // An ack arrived; returns the transmission time when it matched a pending send.
  std::optional<double> acked(uint64_t key, double hold_seconds, double now);
  // Probe sizes (bytes) to send now: the calibration train once, then exploration probes.
  std::vector<size_t> probesToSend(double now, bool calibrating);
  uint64_t nextProbeId() { return ++probe_id_; }
  void reset();

  costmodel::LinkFit fit() const { return estimator_.fit(); }
  wire::LinkModel toWire() const;
  bool enabled() const { return settings_.measure; }
  uint64_t samples() const { return estimator_.fit().samples; }

 private:
  config::LinkSettings settings_;
  costmodel::LinkEstimator estimator_;
  std::map<uint64_t, std::pair<size_t, double>> pending_;  // key -> (bytes, sent at)
  std::optional<double> last_done_;                        // latest (ack received - hold) seen
  uint64_t probe_id_ = 0;
  bool calibrated_ = false;
};

}  // namespace tern::worker
