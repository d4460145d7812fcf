#include "common/telemetry/telemetry_service.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/telemetry/http_server.hpp"
#include "common/telemetry/process_metrics.hpp"

namespace tern::telemetry {

namespace {

double unixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TelemetryService::TelemetryService(Clock clock, double stale_after_seconds)
    : clock_(std::move(clock)), stale_after_(stale_after_seconds), last_beat_(clock_()) {
  status_json_ = toJson(NodeStatus{});
}

TelemetryService::~TelemetryService() { server_.reset(); }

std::string TelemetryService::serve(const std::string& bind) {
  server_ = std::make_unique<HttpServer>(bind, [this](const HttpRequest& r) { return handle(r); });
  return server_->address();
}

const std::vector<double>& TelemetryService::roundBuckets() {
  static const std::vector<double> b = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,  5,     10,   30,  60,   120};
  return b;
}

void TelemetryService::heartbeat() { last_beat_.store(clock_(), std::memory_order_relaxed); }

bool TelemetryService::healthy() const {
  return clock_() - last_beat_.load(std::memory_order_relaxed) <= stale_after_;
}

void TelemetryService::setDegraded(const std::string& reason) {
  std::lock_guard lock(mutex_);
  degraded_ = reason;
}

std::string TelemetryService::healthz() const {
  if (!healthy()) return "event loop stalled\n";
  std::lock_guard lock(mutex_);
  return degraded_.empty() ? "ok\n" : "degraded: " + degraded_ + "\n";
}

void TelemetryService::publish(const NodeStatus& status) {
  {
    std::lock_guard lock(metrics_mutex_);
    exportMetrics(status);
  }
  std::string json = toJson(status);
  std::lock_guard lock(mutex_);
  status_json_ = std::move(json);
}

void TelemetryService::exportMetrics(const NodeStatus& s) {
  exportNode(s);
  std::set<Labels> listed;
  for (const auto& w : s.workers) listed.insert({{"worker", w.name}, {"id", std::to_string(w.id)}});
  // A worker no longer listed, or listed under another id (a re-join), loses its old series.
  for (const auto& old : worker_series_) {
    if (!listed.count(old)) metrics_.removeSeries(old);
  }
  worker_series_ = std::move(listed);
  for (const auto& w : s.workers) exportWorker(w);
  observeRounds(s);
}

void TelemetryService::exportNode(const NodeStatus& s) {
  auto& m = metrics_;
  m.setGauge("tern_info", "Constant 1, labelled with the daemon's role, name and version.",
             {{"role", s.role}, {"name", s.name}, {"version", s.version}}, 1);
  m.setGauge("tern_round",
             "Last closed round (coordinator) or the round of the worker's model replica.", {},
             double(s.round));
  m.setCounterTotal("tern_rounds_total",
                    "Rounds completed: closed by the coordinator, or computed by the worker.", {},
                    double(s.rounds_completed));
  if (s.round_deadline_seconds > 0) {
    m.setGauge("tern_round_deadline_seconds",
               "Longest a round waits for pushes before it closes (round_deadline_seconds).", {},
               s.round_deadline_seconds);
  }
  m.setGauge("tern_train_loss", "Training loss of the last round.", {}, s.train_loss);
  if (s.test_accuracy) {
    m.setGauge("tern_test_accuracy", "Test accuracy at the last evaluation (0 to 1).", {},
               *s.test_accuracy);
  } else {
    m.removeGauge("tern_test_accuracy", {});
  }
  m.setCounterTotal(
      "tern_upload_bytes_total",
      "Bytes workers sent the coordinator: pushes and link probes (a worker: its own).", {},
      double(s.upload_bytes));
  m.setCounterTotal("tern_download_bytes_total",
                    "Bytes the coordinator sent workers (a worker: what it received).", {},
                    double(s.download_bytes));
  m.setCounterTotal("tern_full_bytes_total",
                    "Bytes the pushes would have cost as uncompressed fp32 gradients.", {},
                    double(s.full_bytes));
  m.setGauge("tern_participants", "Workers whose push made it into the last round.", {},
             s.participants);
  m.setGauge("tern_alive_workers",
             "Workers the coordinator considers alive (a worker: 1 while it has joined).", {},
             s.alive_workers);
  m.setCounterTotal("tern_late_pushes_total", "Pushes that arrived after their round closed.", {},
                    double(s.late_pushes));
  if (s.trainer) {
    m.setGauge(
        "tern_trainer_connected",
        "1 while the worker has a trainer: built in, or an external one connected (its Hello "
        "accepted, its connection open); else 0.",
        {}, s.trainer->connected ? 1.0 : 0.0);
  }
  for (const auto& [reason, n] : s.rejected) {
    m.setCounterTotal("tern_rejected_messages_total", "Messages refused, by reason.",
                      {{"reason", reason}}, double(n));
  }
  for (const auto& [name, c] : s.counters) {
    m.setCounterTotal("tern_" + name + "_total", c.help, {}, double(c.value));
  }
  if (server_) exportHttpServer();
}

void TelemetryService::exportHttpServer() {
  metrics_.setCounterTotal(
      "tern_http_idle_connections_closed_total",
      "Telemetry connections closed to make room while they had sent no request.", {},
      double(server_->idleConnectionsClosed()));
  metrics_.setCounterTotal("tern_http_connections_refused_total",
                           "Telemetry connections refused while every open one was being answered.",
                           {}, double(server_->connectionsRefused()));
}

void TelemetryService::exportWorker(const PeerStatus& w) {
  auto& m = metrics_;
  Labels l{{"worker", w.name}, {"id", std::to_string(w.id)}};
  m.setGauge("tern_worker_alive", "1 while the worker is considered alive, else 0.", l, w.alive);
  m.setGauge("tern_worker_cap",
             "Compression cap k_i the coordinator set for the worker (0 while it is gone).", l,
             w.cap);
  m.setGauge("tern_worker_share", "Data share p_i of the worker (0 to 1).", l, w.share);
  m.setGauge("tern_worker_level", "Level T of the worker's last push (0: none last round).", l,
             w.level);
  m.setGauge("tern_worker_predicted_cost",
             "Cost C(T) the worker's tuner predicted for its last push, in its model's unit.", l,
             w.predicted_cost);
  m.setGauge("tern_worker_predicted_improvement",
             "Objective improvement the worker's tuner predicted for its last push.", l,
             w.predicted_improvement);
  m.setGauge("tern_worker_predicted_step",
             "Step the predicted improvement assumes (the coordinator's or the paper's).", l,
             w.predicted_step);
  m.setCounterTotal("tern_worker_upload_bytes_total",
                    "Bytes the worker sent the coordinator: pushes and link probes.", l,
                    double(w.upload_bytes));
  m.setCounterTotal("tern_worker_download_bytes_total", "Bytes the coordinator sent the worker.", l,
                    double(w.download_bytes));
  m.setGauge("tern_worker_benched", "1 while the worker is benched as a straggler, else 0.", l,
             w.benched);
  m.setCounterTotal("tern_worker_pushes_clipped_total",
                    "Pushes of the worker whose norm was clipped to the round's bound.", l,
                    double(w.pushes_clipped));
  exportLink(l, w.link);
}

void TelemetryService::exportLink(const Labels& l, const LinkStatus& link) {
  auto& m = metrics_;
  m.setGauge("tern_worker_link_a_seconds",
             "Fitted fixed cost a of one transfer on the worker's link, in seconds.", l,
             link.a_seconds);
  m.setGauge("tern_worker_link_per_packet_seconds",
             "Fitted cost b of each packet of a transfer on the worker's link, in seconds.", l,
             link.b_seconds_per_packet);
  if (std::isfinite(link.b_stderr)) {  // +inf while the fit cannot compute it: no sample
    m.setGauge("tern_worker_link_per_packet_stderr_seconds",
               "Standard error of the fitted per-packet cost b, in seconds.", l, link.b_stderr);
  } else {
    m.removeGauge("tern_worker_link_per_packet_stderr_seconds", l);  // not the last one it had
  }
  m.setGauge("tern_worker_link_r2", "Coefficient of determination R^2 of the link fit.", l,
             link.r2);
  m.setGauge("tern_worker_link_samples", "Transfers the link fit is based on.", l,
             double(link.samples));
}

void TelemetryService::observeRounds(const NodeStatus& s) {
  auto& m = metrics_;
  // One observation per completed round; when several rounds completed since the last
  // publication, each gets their mean duration.
  // A first publication that already counts several rounds (a resumed run) only sets the
  // baseline: their durations are unknown here.
  if (s.rounds_completed > seen_rounds_) {
    uint64_t n = s.rounds_completed - seen_rounds_;
    bool baseline_only = seen_rounds_ == 0 && n > 1;
    double each = seen_rounds_ == 0 ? s.time_s : (s.time_s - seen_time_) / double(n);
    for (uint64_t i = 0; i < n && !baseline_only; ++i) {
      m.observe("tern_round_duration_seconds",
                "Seconds each round took (between consecutive round completions).", roundBuckets(),
                std::max(0.0, each));
    }
    if (!baseline_only) {
      m.setGauge("tern_last_round_completed_timestamp_seconds",
                 "Unix time at which this process last saw a round complete.", {}, unixSeconds());
    }
    seen_rounds_ = s.rounds_completed;
    seen_time_ = s.time_s;
  }
}

std::string TelemetryService::metricsText() const {
  std::string text;
  {
    std::lock_guard lock(metrics_mutex_);
    text = metrics_.scrape();
  }
  return text + processMetricsText();
}

std::string TelemetryService::statusJson() const {
  std::lock_guard lock(mutex_);
  return status_json_;
}

HttpResponse TelemetryService::handle(const HttpRequest& request) const {
  HttpResponse r;
  if (request.method != "GET" && request.method != "HEAD") {
    r.status = 405;
    r.body = "only GET and HEAD\n";
    return r;
  }
  if (request.path == "/metrics") {
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metricsText();
  } else if (request.path == "/status") {
    r.content_type = "application/json";
    r.body = statusJson() + "\n";
  } else if (request.path == "/healthz") {
    r.body = healthz();
    r.status = r.body == "ok\n" ? 200 : 503;
  } else if (request.path == "/") {
    r.body = "tern telemetry: /metrics /status /healthz\n";
  } else {
    r.status = 404;
    r.body = "not found\n";
  }
  return r;
}

}  // namespace tern::telemetry
