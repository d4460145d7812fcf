// The link estimator's exploration: the recent push sizes, and the calibration probes asked for
// when they are too alike to identify the per-packet slope b (link_estimator.hpp).
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "common/costmodel/link_estimator.hpp"

namespace tern::costmodel {
namespace {

constexpr double kProbeWindowSeconds = 60.0;
constexpr uint64_t kUnknownSlopeProbeSpacing = 2;  // samples

// A calibration size (of `sorted`) at least 4x away from the pushes' mean packet count: below it
// when the pushes are large (the largest such size: a one-packet probe is cheaper, but on a
// token-bucket link its packet goes free and its time is only latency), above it when they are
// small (the smallest). Nullopt when the size found does not differ from the mean.
std::optional<size_t> farCalibrationSize(const std::vector<size_t>& sorted, double mean) {
  const double m = std::max(mean, 1.0);
  size_t packets = 0;
  if (static_cast<double>(sorted.front()) * 4.0 <= m) {
    for (size_t c : sorted)
      if (static_cast<double>(c) * 4.0 <= m) packets = c;
  } else {
    auto above = std::find_if(sorted.begin(), sorted.end(),
                              [&](size_t c) { return static_cast<double>(c) >= 4.0 * m; });
    packets = above != sorted.end() ? *above : sorted.back();
    if (static_cast<double>(packets) == mean) return std::nullopt;  // nothing differs
  }
  return packets;
}

// A slow link's share may not hold the size asked for: the largest calibration size that fits
// in `room` bytes and still differs from the pushes (m packets) by 2x tells b apart from a too,
// if less sharply. 0 when none does.
size_t fittingCalibrationSize(const std::vector<size_t>& sorted, double m, size_t packet_bytes,
                              double room) {
  size_t packets = 0;
  for (size_t c : sorted) {
    const double x = static_cast<double>(c);
    const bool differs = x >= 2.0 * m || 2.0 * x <= m;
    if (differs && x * packet_bytes <= room) packets = c;
  }
  return packets;
}

}  // namespace

void LinkEstimator::noteSize(double x, bool probe) {
  // Packet counts are integers, so the running sums stay exact when old entries are removed.
  if (recent_sizes_.size() < spec_.exploration_window) {
    recent_sizes_.push_back(x);
    recent_probe_.push_back(probe);
  } else {
    const double old = recent_sizes_[recent_next_];
    recent_sum_ -= old;
    recent_sum_sq_ -= old * old;
    if (!recent_probe_[recent_next_]) {
      recent_push_sum_ -= old;
      --recent_pushes_;
    }
    recent_sizes_[recent_next_] = x;
    recent_probe_[recent_next_] = probe;
  }
  recent_sum_ += x;
  recent_sum_sq_ += x * x;
  if (!probe) {
    recent_push_sum_ += x;
    ++recent_pushes_;
  }
  recent_next_ = (recent_next_ + 1) % spec_.exploration_window;
  ++samples_since_probe_;
}

std::optional<size_t> LinkEstimator::probeToSend(double now_seconds) {
  while (!probes_sent_.empty() && probes_sent_.front().first <= now_seconds - kProbeWindowSeconds)
    probes_sent_.pop_front();

  if (spec_.calibration_packets.empty() || recent_sizes_.size() < kMinExplorationWindow)
    return std::nullopt;
  // While b is unknown, probe whatever the recent mix of sizes, and more often: two probes that
  // agree are needed before one of them is believed (see addFarSample).
  const bool slope_unknown = bootstrapped_ && !slopeIdentified();
  const uint64_t spacing = slope_unknown ? kUnknownSlopeProbeSpacing : spec_.exploration_window / 4;
  if (samples_since_probe_ < spacing) return std::nullopt;
  const double n = static_cast<double>(recent_sizes_.size());
  const double mean = recent_sum_ / n;
  if (!slope_unknown) {
    const double var = std::max(0.0, recent_sum_sq_ / n - mean * mean);
    if (mean > 0 && std::sqrt(var) >= spec_.identifiability_cv * mean) return std::nullopt;
  }

  // Away from the pushes' sizes: earlier probes in the window would pull a mean of all recent
  // sizes towards the probes (one-packet pushes then drew 16-packet probes, not 4).
  const double pushes =
      recent_pushes_ > 0 ? recent_push_sum_ / static_cast<double>(recent_pushes_) : mean;
  const std::vector<size_t> sizes = usefulCalibrationPackets();
  if (sizes.empty()) return std::nullopt;
  const std::optional<size_t> far = farCalibrationSize(sizes, pushes);
  if (!far) return std::nullopt;
  size_t bytes = *far * spec_.packet_bytes;
  const double room = probeRoom();
  if (static_cast<double>(bytes) > room) {
    const size_t packets =
        fittingCalibrationSize(sizes, std::max(pushes, 1.0), spec_.packet_bytes, room);
    if (packets == 0) return std::nullopt;
    bytes = packets * spec_.packet_bytes;
  }

  probes_sent_.emplace_back(now_seconds, bytes);
  samples_since_probe_ = 0;
  return bytes;
}

double LinkEstimator::probeRoom() const {
  size_t spent = 0;
  for (const auto& [t, b] : probes_sent_) spent += b;
  double cap = static_cast<double>(spec_.probe_bytes_per_minute);
  // The slope last identified (or, before the first fit, the median time per packet): while
  // the pushes are too alike to identify it again is when probes are asked for most often.
  const Line line = currentLine(nullptr);
  if (line.b > 0.0) {
    const double link_minute = kProbeWindowSeconds / line.b * spec_.packet_bytes;
    cap = std::min(cap, spec_.probe_link_share * link_minute);
  }
  return cap - static_cast<double>(spent);
}

std::vector<size_t> LinkEstimator::usefulCalibrationPackets() const {
  std::vector<size_t> sizes = spec_.calibration_packets;
  std::sort(sizes.begin(), sizes.end());
  if (largest_push_bytes_ == 0 || sizes.empty()) return sizes;
  const size_t push_packets = (largest_push_bytes_ + spec_.packet_bytes - 1) / spec_.packet_bytes;
  if (push_packets <= 1) return {};
  auto covering = std::lower_bound(sizes.begin(), sizes.end(), push_packets);
  if (covering != sizes.end()) sizes.erase(std::next(covering), sizes.end());
  return sizes;
}

std::vector<size_t> LinkEstimator::calibrationPlan() const {
  std::vector<size_t> plan;
  plan.reserve(spec_.calibration_packets.size() * spec_.probe_repeats);
  for (uint32_t r = 0; r < spec_.probe_repeats; ++r)
    for (size_t packets : spec_.calibration_packets) plan.push_back(packets * spec_.packet_bytes);
  return plan;
}

}  // namespace tern::costmodel
