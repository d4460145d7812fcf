#pragma once
// The worker DEALER's security from the configuration: a CURVE client that knows the
// coordinator's public key, or plaintext (said explicitly in the configuration, warned about).
#include <cstdint>
#include <functional>
#include <optional>
#include <zmq.hpp>

#include "common/config/settings.hpp"
#include "common/daemon/poll_loop.hpp"
#include "common/daemon/reconnect_backoff.hpp"
#include "common/daemon/throttle.hpp"
#include "common/transport/channel.hpp"
#include "common/transport/handshake_monitor.hpp"

namespace tern::worker {

// Reads the key files named by `sec`; throws when one is missing or malformed.
transport::CurveOptions curveClient(const config::SecuritySettings& sec);

// The DEALER's connection to the coordinator while the worker runs: whether its handshake is
// done (what is queued can go out), refused or failed handshakes counted, logged at most once per
// interval and retried with a backoff. A main makes it after the channel and before connecting,
// puts watch() in its loop's phases, calls retryIfDue() every turn (retryAt() bounds the wait).
class DealerConnection {
 public:
  // on_up(reconnected): a handshake succeeded; reconnected: on a connection this worker made
  // again after a failure (what was queued on the failed one went with it).
  using OnUp = std::function<void(bool reconnected)>;
  DealerConnection(zmq::context_t& ctx, transport::Channel& channel, daemon::Clock clock);
  // The handshake monitor's socket, served by serve(on_up); on_up empty: up() tracked only.
  daemon::Watch watch(OnUp on_up);
  void serve(const OnUp& on_up);
  // Reconnects when the backoff's retry is due.
  void retryIfDue();
  std::optional<double> retryAt() const { return backoff_.retryAt(); }
  // A new connection now (a re-join on silence: the old one may be dead without the socket
  // knowing, and what queued on it is stale).
  void renew();
  bool up() const { return up_; }
  uint64_t authRefused() const { return auth_refused_; }
  uint64_t handshakeFailed() const { return handshake_failed_; }

 private:
  void failed(const transport::HandshakeEvent& e);

  transport::Channel& channel_;
  transport::HandshakeMonitor handshakes_;
  daemon::Clock clock_;
  daemon::ReconnectBackoff backoff_;
  daemon::Throttle failure_log_{10.0};
  bool up_ = false;
  bool reconnected_ = false;
  uint64_t auth_refused_ = 0;
  uint64_t handshake_failed_ = 0;
};

}  // namespace tern::worker
