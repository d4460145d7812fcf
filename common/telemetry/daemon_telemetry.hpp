#pragma once
// Everything a daemon's event loop does to be watched, behind four calls: the optional HTTP
// endpoint (/metrics, /status, /healthz on its own thread), the file naming its URL (for port 0),
// and systemd notifications (READY, STATUS, WATCHDOG, STOPPING). The loop calls tick() on every
// iteration and publish() after each round or at most every publish_every seconds.
#include <functional>
#include <memory>
#include <string>

#include "common/telemetry/node_status.hpp"
#include "common/telemetry/systemd_notifier.hpp"

namespace tern::telemetry {

class TelemetryService;

struct TelemetryOptions {
  std::string http_bind;      // "HOST:PORT"; empty = no HTTP endpoint
  std::string http_url_file;  // written with "http://HOST:PORT" once bound
  double publish_every_seconds = 1.0;
  double stale_after_seconds = 30.0;  // /healthz fails when the loop is silent this long
};

class DaemonTelemetry {
 public:
  using Clock = std::function<double()>;
  // Binds the HTTP endpoint now: a bad or busy address is a start-up error (exception).
  // `initial` is what /status shows from the first request on.
  DaemonTelemetry(const TelemetryOptions& options, Clock clock, const NodeStatus& initial);
  ~DaemonTelemetry();

  // "http://HOST:PORT", empty without an endpoint.
  const std::string& url() const { return url_; }

  void ready(const std::string& status);
  // Every event loop iteration: /healthz heartbeat and systemd watchdog ping.
  void tick();
  // True when the periodic publication is due (membership, rejections between rounds).
  bool publishDue() const;
  // A fresh snapshot; systemd_status becomes the unit's STATUS= line when it changed.
  void publish(const NodeStatus& status, const std::string& systemd_status);
  void stopping(const std::string& status);
  // /healthz answers 503 with `reason` until called again with "".
  void setDegraded(const std::string& reason);

 private:
  TelemetryOptions options_;
  Clock clock_;
  std::unique_ptr<TelemetryService> service_;
  SystemdNotifier systemd_;
  std::string url_;
  std::string last_systemd_status_;
  double last_publish_ = -1e300;
  double last_status_at_ = -1e300;
};

}  // namespace tern::telemetry
