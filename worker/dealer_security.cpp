#include "worker/dealer_security.hpp"

#include <spdlog/spdlog.h>

#include <utility>

#include "common/transport/curve_keys.hpp"

namespace tern::worker {

transport::CurveOptions curveClient(const config::SecuritySettings& sec) {
  transport::CurveOptions curve;
  if (!sec.curve()) {
    spdlog::warn(
        "security: none - connections are neither encrypted nor authenticated: the model and "
        "this worker's updates cross the network in the clear (docs/security.md)");
    return curve;
  }
  curve.secret_key = transport::readSecretKeyFile(sec.secret_key_file);
  curve.server_public_key =
      transport::readKeyFile(sec.server_public_key_file, "coordinator public key file");
  spdlog::info("CURVE on: this worker's public key {}, coordinator {}",
               transport::curvePublicKeyOf(curve.secret_key), curve.server_public_key);
  return curve;
}

DealerConnection::DealerConnection(zmq::context_t& ctx, transport::Channel& channel,
                                   daemon::Clock clock)
    : channel_(channel),
      handshakes_(ctx, channel.socket(), /*disconnects=*/true),
      clock_(std::move(clock)) {}

daemon::Watch DealerConnection::watch(OnUp on_up) {
  return {&handshakes_.socket(), [this, on_up = std::move(on_up)] { serve(on_up); }};
}

void DealerConnection::serve(const OnUp& on_up) {
  using Kind = transport::HandshakeEvent::Kind;
  for (const auto& e : handshakes_.drain()) {
    if (e.kind == Kind::disconnected) {
      // libzmq reconnects by itself; what is queued goes out once the handshake is done again.
      up_ = false;
    } else if (e.kind == Kind::succeeded) {
      up_ = true;
      if (!on_up) continue;
      if (auth_refused_ + handshake_failed_ > 0) {
        spdlog::info("handshake with the coordinator at {} succeeded", e.endpoint);
      }
      backoff_.succeeded();
      on_up(std::exchange(reconnected_, false));
    } else if (on_up) {
      failed(e);
    }
  }
}

void DealerConnection::failed(const transport::HandshakeEvent& e) {
  const bool refused = e.kind == transport::HandshakeEvent::Kind::refused;
  ++(refused ? auth_refused_ : handshake_failed_);
  const double now = clock_();
  backoff_.failed(now);
  if (!failure_log_.allow(now)) return;
  if (refused) {
    spdlog::error(
        "the coordinator at {} refused this worker's key (status {}, {} time(s)): is its public "
        "key on the coordinator's allowlist? retrying",
        e.endpoint, e.status, auth_refused_);
  } else {
    spdlog::error(
        "handshake with the coordinator at {} failed ({} time(s)): do both sides use the same "
        "security mode, and is security.server_public_key_file the coordinator's key? retrying",
        e.endpoint, handshake_failed_);
  }
}

void DealerConnection::retryIfDue() {
  if (!backoff_.due(clock_())) return;
  renew();
  reconnected_ = true;
}

void DealerConnection::renew() {
  channel_.reconnect();
  up_ = false;
}

}  // namespace tern::worker
