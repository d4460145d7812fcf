#include "worker/link_monitor.hpp"

#include <algorithm>

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
  // The socket is a FIFO: a message handed over while an earlier one was still going out waits
  // behind it, and timing it from the hand-over would count that wait as its own link time. It
  // is timed from the earlier one's (ack - hold) instead, which is the packet-pair dispersion:
  // its own bytes only, short of the path latency (unknown here, and not taken from the fit,
  // whose a would otherwise confirm itself).
  const double done = now - hold_seconds;
  const double start = last_done_ ? std::max(at, *last_done_) : at;
  last_done_ = std::max(done, last_done_.value_or(done));
  const double seconds = done - start;
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
  last_done_.reset();
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
