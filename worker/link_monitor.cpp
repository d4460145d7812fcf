#include "worker/link_monitor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace tern::worker {
namespace {

costmodel::LinkEstimatorSpec toSpec(const config::LinkSettings& s) {
  costmodel::LinkEstimatorSpec spec;
  spec.packet_bytes = s.packet_bytes;
  spec.calibration_packets = s.calibration_packets;
  spec.probe_repeats = s.probe_repeats;
  spec.probe_bytes_per_minute = s.probe_bytes_per_minute;
  spec.probe_link_share = s.probe_link_share;
  return spec;
}

// Acks that never come must not grow the table without bound.
constexpr size_t kMaxPending = 256;

}  // namespace

size_t zmtpFrameHeaderBytes(size_t frame_bytes) { return frame_bytes <= 255 ? 2 : 9; }

size_t zmtpWireBytes(size_t envelope_bytes, size_t payload_bytes) {
  size_t n = envelope_bytes + zmtpFrameHeaderBytes(envelope_bytes);
  if (payload_bytes > 0) n += payload_bytes + zmtpFrameHeaderBytes(payload_bytes);
  return n;
}

size_t zmtpPayloadFor(size_t wire_bytes, size_t envelope_bytes) {
  const size_t head = envelope_bytes + zmtpFrameHeaderBytes(envelope_bytes);
  if (wire_bytes <= head + 2) return 0;  // no room for a payload frame of even one byte
  const size_t room = wire_bytes - head;
  // A long frame header when the payload needs it, else a short one.
  if (room >= 9 + 256) return room - 9;
  return std::min<size_t>(room - 2, 255);
}

LinkMonitor::LinkMonitor(const config::LinkSettings& settings, double ack_timeout_seconds)
    : settings_(settings), ack_timeout_(ack_timeout_seconds), estimator_(toSpec(settings)) {}

void LinkMonitor::issued(uint64_t key, double now) {
  if (!active()) return;
  Pending p;
  p.order = ++order_;
  p.issued_at = now;
  pending_[key] = p;
  while (pending_.size() > kMaxPending) {
    auto oldest = std::min_element(
        pending_.begin(), pending_.end(),
        [](const auto& x, const auto& y) { return x.second.order < y.second.order; });
    drop(oldest);
  }
}

void LinkMonitor::sent(uint64_t key, size_t wire_bytes, double now) {
  if (!settings_.measure) return;
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    // Not announced by issued(): timed all the same, from now (unless issued() declines, as
    // while measurement is paused).
    issued(key, now);
    it = pending_.find(key);
    if (it == pending_.end()) return;
  }
  it->second.bytes = wire_bytes;
  it->second.sent_at = now;
}

void LinkMonitor::drop(std::map<uint64_t, Pending>::iterator it) {
  // Whatever was handed to the socket after it may have waited behind its bytes for an unknown
  // time: those cannot be timed.
  const uint64_t order = it->second.order;
  for (auto& [key, p] : pending_) {
    if (p.order > order) p.untimed = true;
  }
  pending_.erase(it);
  ++unacknowledged_;
}

void LinkMonitor::expire(double now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto next = std::next(it);  // drop() erases only `it`
    if (now >= it->second.issued_at + ack_timeout_) drop(it);
    it = next;
  }
}

std::optional<double> LinkMonitor::acked(uint64_t key, double hold_seconds, double now) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return std::nullopt;
  Pending mine = it->second;
  pending_.erase(it);
  // Answers come in order: anything sent before this one and still waiting was refused or lost,
  // and this one may have waited behind its bytes.
  for (;;) {
    auto older = std::find_if(pending_.begin(), pending_.end(),
                              [&](const auto& e) { return e.second.order < mine.order; });
    if (older == pending_.end()) break;
    drop(older);
    mine.untimed = true;
  }
  // The socket is a FIFO: a message handed over while an earlier one was still going out waits
  // behind it, and timing it from the hand-over would count that wait as its own link time.
  // From the earlier one's (ack - hold) it would time the packet-pair dispersion, its own bytes
  // only, without the path latency that a stands for: fed to the fit a + b x, such samples
  // pulled a towards 0 (1 ms for a 10 ms path after the calibration train). It gives no
  // sample; the probe ahead of it was timed from an idle link.
  // A hold that is no time (negative, NaN, infinite) says nothing of when the bytes arrived.
  if (!std::isfinite(hold_seconds) || hold_seconds < 0.0) return std::nullopt;
  const double done = now - hold_seconds;
  const std::optional<double> previous = last_done_;
  last_done_ = std::max(done, last_done_.value_or(done));
  if (!mine.sent_at || mine.untimed) return std::nullopt;
  if (previous && *previous > *mine.sent_at) {
    spdlog::debug("link: {} bytes went behind the previous message: not timed", mine.bytes);
    return std::nullopt;
  }
  const double seconds = done - *mine.sent_at;
  if (!(seconds > 0.0)) return std::nullopt;
  const bool probe = isProbeKey(key);
  estimator_.addSample(mine.bytes, seconds, probe);
  if (probe) probe_times_.record(mine.bytes, seconds);
  spdlog::debug("link sample: {} bytes in {:.6f} s", mine.bytes, seconds);
  return seconds;
}

void LinkMonitor::queueCalibration() {
  if (!settings_.measure || calibrated_) return;
  calibrated_ = true;
  // A train cut short by a re-join goes on from the probe it had reached, then comes round to the
  // ones it sent before. Restarted from its first probe, a worker that re-joins before its train
  // reaches the larger sizes (its pushes, slower than the coordinator's patience, refused each
  // time) only ever timed the smallest, and never told a from b.
  // The train goes to the front of the queue, ahead of any exploration probe (train_queued_
  // counts it there).
  const std::vector<size_t> plan = estimator_.calibrationPlan();
  for (size_t i = plan.size(); i-- > 0;) queue_.push_front(plan[(train_next_ + i) % plan.size()]);
  train_queued_ += plan.size();
}

void LinkMonitor::queueExploration(double now) {
  if (!active()) return;
  // One exploration probe at a time: while one still waits, the estimator has not seen it yet.
  if (!queue_.empty()) return;
  if (auto probe = estimator_.probeToSend(now)) queue_.push_back(*probe);
}

std::optional<size_t> LinkMonitor::peekProbe(double now) {
  expire(now);
  if (queue_.empty() || !pending_.empty()) return std::nullopt;
  skipUnneededCalibration();
  if (queue_.empty()) return std::nullopt;
  return queue_.front();
}

bool LinkMonitor::usefulCalibration(size_t bytes) const {
  const std::vector<size_t> useful = estimator_.usefulCalibrationPackets();
  return !useful.empty() && bytes <= useful.back() * settings_.packet_bytes;
}

void LinkMonitor::skipUnneededCalibration() {
  // The train's probes only (queued ahead of any exploration probe, which its budget sizes).
  while (train_queued_ > 0) {
    const size_t bytes = queue_.front();
    if (!usefulCalibration(bytes)) {
      spdlog::info("link: calibration probe of {} bytes skipped: {}", bytes,
                   estimator_.usefulCalibrationPackets().empty()
                       ? "the largest push this worker may send fits one packet, so every push "
                         "costs the same"
                       : "no push this worker may send spans that many packets");
    } else if (probe_times_.tooLong(bytes, settings_.calibration_max_seconds)) {
      spdlog::info(
          "link: calibration probe of {} bytes skipped: the smaller probes put it past {} s", bytes,
          settings_.calibration_max_seconds);
    } else {
      break;
    }
    queue_.pop_front();
    --train_queued_;
    ++train_next_;
    ++skipped_calibration_;
  }
}

std::optional<size_t> LinkMonitor::nextProbe(double now) {
  const std::optional<size_t> next = peekProbe(now);
  if (!next) return std::nullopt;
  const size_t bytes = *next;
  queue_.pop_front();
  if (train_queued_ > 0) {  // the train is queued ahead of any exploration probe
    --train_queued_;
    ++train_next_;
  }
  return bytes;
}

void LinkMonitor::reset() {
  pending_.clear();
  queue_.clear();
  train_queued_ = 0;
  last_done_.reset();
  // The fit survives a re-join (the link is the same; a changed one is followed as any change
  // is). A train cut short by the re-join, before the fit could tell a from b, goes on at the
  // next (see queueCalibration);
  // after that, a flapping connection does not pay for the whole train at every re-join.
  calibrated_ = calibrated_ && estimator_.fit().valid;
}

void LinkMonitor::atRound(uint64_t round) {
  const uint32_t n = settings_.alternate_rounds;
  paused_ = n > 0 && (round / n) % 2 == 1;
}

wire::LinkModel LinkMonitor::toWire() const {
  wire::LinkModel m;
  auto f = estimator_.fit();
  m.set_a_seconds(f.a);
  m.set_b_seconds_per_packet(f.b);
  m.set_packet_bytes(f.packet_bytes);
  m.set_samples(f.samples);
  m.set_r2(f.r2);
  m.set_a_stderr(f.a_stderr);
  m.set_b_stderr(f.b_stderr);
  return m;
}

}  // namespace tern::worker
