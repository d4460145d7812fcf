#pragma once
// The coordinator ROUTER's security from the configuration: CURVE server keys and the ZAP handler
// that admits only allowlisted workers (reloaded on SIGHUP), or plaintext, warned about.
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/config/settings.hpp"
#include "common/daemon/poll_loop.hpp"
#include "common/daemon/throttle.hpp"
#include "common/transport/channel.hpp"
#include "common/transport/handshake_monitor.hpp"
#include "common/transport/zap_handler.hpp"
#include "server/coordinator_status.hpp"
#include "server/join_limiter.hpp"
#include "server/membership.hpp"

namespace tern::server {

// Sets opts.curve for a CURVE server and returns the ZAP handler, which must exist before the
// ROUTER accepts its first connection; nullptr with security: none.
std::unique_ptr<transport::ZapHandler> setUpSecurity(const config::SecuritySettings& sec,
                                                     zmq::context_t& ctx,
                                                     transport::ChannelOptions& opts);

// SIGHUP: the allowlist read again from its file; on an error the previous one stays (logged).
void reloadAllowlist(transport::ZapHandler* zap);

// The ROUTER's connections while the coordinator runs: ZAP verdicts (admissions logged), failed
// handshakes, both counted, and refusals logged at most once per interval. A main makes it after
// the channel and before binding, puts watches() in its loop's phases and reload() in on_reload.
class RouterSecurity {
 public:
  // zap: from setUpSecurity (nullptr with security: none).
  RouterSecurity(zmq::context_t& ctx, transport::Channel& channel,
                 std::unique_ptr<transport::ZapHandler> zap, daemon::Clock clock,
                 const config::JoinRateSettings& per_key = {});
  // The handshake monitor's and the ZAP handler's sockets, each served by serve().
  std::vector<daemon::Watch> watches();
  // Answers pending ZAP requests and takes the handshake events, without blocking.
  void serve();
  // SIGHUP: the allowlist read again.
  void reload() { reloadAllowlist(zap_.get()); }
  // Why a join under `name` from the client with ZAP user id `key` is refused before the core
  // sees it (joins too fast for the key, or a name its allowlist line does not give it); nothing
  // with security: none.
  std::optional<JoinRefusal> checkJoin(const std::string& key, const std::string& name);
  const AuthCounters& counters() const { return auth_; }

 private:
  std::unique_ptr<transport::ZapHandler> zap_;
  transport::HandshakeMonitor handshakes_;
  daemon::Clock clock_;
  JoinLimiter key_joins_;  // joins per CURVE key
  AuthCounters auth_;
  std::string last_refusal_;
  daemon::Throttle refusal_log_{10.0};
};

}  // namespace tern::server
