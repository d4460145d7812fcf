#include "worker/link_monitor.hpp"

namespace tern::worker {
namespace {

costmodel::LinkEstimatorSpec toSpec(const config::LinkSettings& s) {
  costmodel::LinkEstimatorSpec spec;
  spec.packet_bytes = s.packet_bytes;
  spec.calibration_packets = s.calibration_packets;
  spec.probe_repeats = s.probe_repeats;
  spec.probe_bytes_per_minute = s.probe_bytes_per_minute;
  return spec;
}

}  // namespace

LinkMonitor::LinkMonitor(const config::LinkSettings& settings)
    : settings_(settings), estimator_(toSpec(settings)) {}

void LinkMonitor::sent(uint64_t key, size_t wire_bytes, double now) {
  if (!settings_.measure) return;
  pending_[key] = {wire_bytes, now};
  // Acks that never come (a lost round) must not grow the table without bound.
  while (pending_.size() > 256) pending_.erase(pending_.begin());
}

std::optional<double> LinkMonitor::acked(uint64_t key, double hold_seconds, double now) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return std::nullopt;
  auto [bytes, at] = it->second;
  pending_.erase(it);
  double seconds = now - at - hold_seconds;
  if (!(seconds > 0.0)) return std::nullopt;
  estimator_.addSample(bytes, seconds);
  return seconds;
}

std::vector<size_t> LinkMonitor::probesToSend(double now, bool calibrating) {
  std::vector<size_t> sizes;
  if (!settings_.measure) return sizes;
  if (calibrating && !calibrated_) {
    calibrated_ = true;
    return estimator_.calibrationPlan();
  }
  if (auto probe = estimator_.probeToSend(now)) sizes.push_back(*probe);
  return sizes;
}

void LinkMonitor::reset() {
  pending_.clear();
  calibrated_ = false;
}

wire::LinkModel LinkMonitor::toWire() const {
  wire::LinkModel m;
  auto f = estimator_.fit();
  m.set_a_seconds(f.a);
  m.set_b_seconds_per_packet(f.b);
  m.set_packet_bytes(f.packet_bytes);
  m.set_samples(f.samples);
  m.set_r2(f.r2);
  return m;
}

}  // namespace tern::worker
