#include "server/router_security.hpp"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

#include "common/transport/allowlist.hpp"
#include "common/transport/curve_keys.hpp"

namespace tern::server {

std::unique_ptr<transport::ZapHandler> setUpSecurity(const config::SecuritySettings& sec,
                                                     zmq::context_t& ctx,
                                                     transport::ChannelOptions& opts) {
  if (!sec.curve()) {
    spdlog::warn(
        "security: none - connections are neither encrypted nor authenticated: anyone who reaches "
        "the coordinator's port can join, read the model and push updates (docs/security.md)");
    return nullptr;
  }
  opts.curve.server = true;
  opts.curve.secret_key = transport::readSecretKeyFile(sec.secret_key_file);
  auto allowlist = transport::Allowlist::load(sec.allowlist);
  if (allowlist.size() == 0) {
    spdlog::warn("allowlist {} admits no worker yet (add keys and send SIGHUP)", sec.allowlist);
  }
  spdlog::info("CURVE on: public key {}, {} worker key(s) allowed from {}",
               transport::curvePublicKeyOf(opts.curve.secret_key), allowlist.size(), sec.allowlist);
  if (allowlist.unboundKeys() > 0) {
    spdlog::warn(
        "{} allowlisted key(s) without names= may join under any worker name "
        "(docs/security.md)",
        allowlist.unboundKeys());
  }
  // The handler must be bound before the ROUTER accepts its first connection.
  return std::make_unique<transport::ZapHandler>(ctx, std::move(allowlist));
}

void reloadAllowlist(transport::ZapHandler* zap) {
  if (!zap) {
    spdlog::info("SIGHUP: nothing to reload (security: none)");
    return;
  }
  try {
    auto fresh = transport::Allowlist::load(zap->allowlist().source());
    spdlog::info("SIGHUP: allowlist {} reloaded: {} worker key(s) (was {})", fresh.source(),
                 fresh.size(), zap->allowlist().size());
    zap->replaceAllowlist(std::move(fresh));
  } catch (const std::exception& e) {
    spdlog::error("SIGHUP: allowlist not reloaded, keeping the previous one: {}", e.what());
  }
}

RouterSecurity::RouterSecurity(zmq::context_t& ctx, transport::Channel& channel,
                               std::unique_ptr<transport::ZapHandler> zap, daemon::Clock clock,
                               const config::JoinRateSettings& per_key)
    : zap_(std::move(zap)),
      handshakes_(ctx, channel.socket()),
      clock_(std::move(clock)),
      key_joins_({per_key.rate, per_key.burst}) {}

std::optional<JoinRefusal> RouterSecurity::checkJoin(const std::string& key,
                                                     const std::string& name) {
  if (!zap_) return std::nullopt;
  if (!key_joins_.take(key, clock_())) {
    return JoinRefusal{wire::Error::TOO_MANY_WORKERS, "join_rate_key",
                       "too many joins with this worker's key: try again in a few seconds"};
  }
  if (!zap_->allowlist().mayUse(key, name)) {
    return JoinRefusal{wire::Error::NAME_TAKEN, "name_not_allowed",
                       "worker name '" + name +
                           "' is not one this worker's key may use (names= on its line of the "
                           "coordinator's allowlist)"};
  }
  return std::nullopt;
}

std::vector<daemon::Watch> RouterSecurity::watches() {
  std::vector<daemon::Watch> w{{&handshakes_.socket(), [this] { serve(); }}};
  if (zap_) w.push_back({&zap_->socket(), [this] { serve(); }});
  return w;
}

void RouterSecurity::serve() {
  if (zap_) {
    for (const auto& v : zap_->serve()) {
      if (v.admitted) {
        spdlog::info("admitted worker key {} ({}) from {}", v.public_key, v.label, v.address);
      } else {
        last_refusal_ = fmt::format("key {} from {}: {}", v.public_key.empty() ? "-" : v.public_key,
                                    v.address, v.reason);
      }
    }
    auth_.admitted = zap_->admitted();
    auth_.refused = zap_->refused();
  }
  for (const auto& e : handshakes_.drain()) {
    if (e.kind != transport::HandshakeEvent::Kind::failed) continue;
    ++auth_.handshake_failed;
    last_refusal_ = fmt::format(
        "a handshake on {} failed (security mode or keys differ, or a port check that connected "
        "and closed; libzmq does not say the peer's address)",
        e.endpoint);
  }
  const uint64_t refusals = auth_.refused + auth_.handshake_failed;
  if (refusal_log_.changed(refusals, clock_())) {
    spdlog::warn("refused {} connection(s) so far (auth_refused={} handshake_failed={}); last: {}",
                 refusals, auth_.refused, auth_.handshake_failed, last_refusal_);
  }
}

}  // namespace tern::server
