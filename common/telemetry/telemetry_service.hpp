#pragma once
// A daemon's telemetry endpoint: /metrics (Prometheus text), /status (JSON) and /healthz.
// The event loop calls publish() after each round or event and heartbeat() on every iteration;
// the HTTP thread answers from what was published (a JSON snapshot under a mutex, prometheus-cpp
// metrics, an atomic heartbeat time) and never sees the protocol cores.
// /healthz fails (503) when the loop has not beaten for stale_after seconds: a wedged loop is
// what a container healthcheck or a load balancer should notice. It fails too, with the reason,
// while the daemon reports itself degraded (e.g. its checkpoints cannot be written).
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/telemetry/http_request.hpp"
#include "common/telemetry/metrics_registry.hpp"
#include "common/telemetry/node_status.hpp"

namespace tern::telemetry {

class HttpServer;

class TelemetryService {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  TelemetryService(Clock clock, double stale_after_seconds = 30.0);
  ~TelemetryService();

  // Starts the HTTP endpoint on its own thread ("HOST:PORT", port 0 = any free port).
  // Returns the bound "host:port". Throws on a bad or unavailable address.
  std::string serve(const std::string& bind);

  // Event loop thread only.
  void publish(const NodeStatus& status);
  void heartbeat();
  // What keeps the daemon from doing its job while the loop runs on; "" when nothing does.
  void setDegraded(const std::string& reason);

  // Any thread.
  HttpResponse handle(const HttpRequest& request) const;
  std::string metricsText() const;
  std::string statusJson() const;
  bool healthy() const;
  // The /healthz body: "ok", "event loop stalled" or "degraded: REASON", one line.
  std::string healthz() const;

  // Upper bounds (seconds) of the round-duration histogram.
  static const std::vector<double>& roundBuckets();

 private:
  void exportMetrics(const NodeStatus& s);
  void exportNode(const NodeStatus& s);
  void exportHttpServer();
  void exportWorker(const PeerStatus& w);
  void exportLink(const Labels& l, const LinkStatus& link);
  void observeRounds(const NodeStatus& s);

  Clock clock_;
  double stale_after_;
  // Held while a publication updates the metrics and while a scrape reads them, so a scrape
  // never mixes two rounds (a counter of round r with a gauge of round r+1).
  mutable std::mutex metrics_mutex_;
  MetricsRegistry metrics_;
  mutable std::mutex mutex_;
  std::string status_json_;  // guarded by mutex_
  std::string degraded_;     // guarded by mutex_
  std::atomic<double> last_beat_;
  // Event loop thread only: to turn cumulative rounds into histogram observations.
  uint64_t seen_rounds_ = 0;
  std::set<Labels> worker_series_;  // the per-worker label sets of the last publication
  double seen_time_ = 0.0;
  std::unique_ptr<HttpServer> server_;  // last member: stopped before the rest is destroyed
};

}  // namespace tern::telemetry
