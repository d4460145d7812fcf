#pragma once
// When a connecting daemon tries again after a refused or failed security handshake: libzmq does
// not retry such a connection by itself. The delay doubles from 1 s to 8 s and resets on a
// handshake that succeeds, so a key added to the allowlist later (and a SIGHUP) lets the worker
// in within seconds. A main feeds it handshake outcomes and reconnects when due():
//
//   if (event.kind == Kind::failed) backoff.failed(now); else backoff.succeeded();
//   if (backoff.due(now)) channel.reconnect();
#include <algorithm>
#include <optional>

namespace tern::daemon {

class ReconnectBackoff {
 public:
  // A handshake failed at `now`: a retry falls due after the next, doubled, delay.
  void failed(double now) {
    delay_ = std::min(delay_ * 2, kMaxDelay);
    retry_at_ = now + delay_;
  }
  // A handshake succeeded (libzmq reconnected by itself): no retry, which would tear the new
  // connection down, and the next failure starts from the shortest delay again.
  void succeeded() {
    delay_ = kFirstDelay / 2;
    retry_at_.reset();
  }
  // True once when the pending retry is due; the caller reconnects.
  bool due(double now) {
    if (!retry_at_ || now < *retry_at_) return false;
    retry_at_.reset();
    return true;
  }
  // When the pending retry falls due (for the loop's wait), if one is pending.
  std::optional<double> retryAt() const { return retry_at_; }

 private:
  static constexpr double kFirstDelay = 1.0;
  static constexpr double kMaxDelay = 8.0;
  double delay_ = kFirstDelay / 2;
  std::optional<double> retry_at_;
};

}  // namespace tern::daemon
