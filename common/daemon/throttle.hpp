#pragma once
// At most one log line per interval for what can repeat without end (refused connections,
// rejected messages, failed handshakes): a flood becomes a count, not a flood of lines. A main
// keeps one per kind of report and asks it before logging:
//
//   daemon::Throttle refusals(10.0);
//   if (refusals.changed(auth.refused, steadySeconds())) spdlog::warn("refused {}", auth.refused);
#include <cstdint>

namespace tern::daemon {

class Throttle {
 public:
  explicit Throttle(double interval_seconds) : interval_(interval_seconds) {}
  // True when more than the interval has passed since the last true (or there was none); a true
  // starts the next interval.
  bool allow(double now) {
    if (said_ && now - last_ <= interval_) return false;
    said_ = true;
    last_ = now;
    return true;
  }
  // As allow(), and only when `count` differs from the count of the last true (first: from 0).
  bool changed(uint64_t count, double now) {
    if (count == last_count_ || !allow(now)) return false;
    last_count_ = count;
    return true;
  }

 private:
  double interval_;
  bool said_ = false;
  double last_ = 0.0;
  uint64_t last_count_ = 0;
};

}  // namespace tern::daemon
