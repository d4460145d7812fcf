#include "worker/link_report.hpp"

#include <cmath>

namespace tern::worker {

bool linkMoved(const wire::LinkModel& was, const wire::LinkModel& now) {
  if (was.packet_bytes() != now.packet_bytes()) return true;
  if ((was.samples() == 0) != (now.samples() == 0) ||
      (was.samples() > 0 && now.samples() >= 2 * was.samples()))
    return true;
  // Identified or no longer: the coordinator reads b only with a finite standard error.
  if (std::isfinite(was.b_stderr()) != std::isfinite(now.b_stderr())) return true;
  const double b = std::abs(was.b_seconds_per_packet());
  const double scale = std::abs(was.a_seconds()) + b;
  return std::abs(now.b_seconds_per_packet() - was.b_seconds_per_packet()) >
             LinkReport::kMove * b ||
         std::abs(now.a_seconds() - was.a_seconds()) > LinkReport::kMove * scale;
}

std::optional<wire::LinkModel> LinkReport::forPush(uint64_t round, const wire::LinkModel& now) {
  ++since_;
  if (taken_ && since_ < kEvery && !linkMoved(*taken_, now)) return std::nullopt;
  since_ = 0;
  in_flight_.emplace(round, now);
  return now;
}

void LinkReport::taken(uint64_t round) {
  if (!in_flight_ || in_flight_->first != round) return;
  taken_ = std::move(in_flight_->second);
  in_flight_.reset();
}

void LinkReport::reset() {
  taken_.reset();
  in_flight_.reset();
  since_ = 0;
}

}  // namespace tern::worker
