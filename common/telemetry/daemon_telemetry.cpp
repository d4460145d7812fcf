#include "common/telemetry/daemon_telemetry.hpp"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "common/telemetry/telemetry_service.hpp"
#include "common/util/durable_file.hpp"

namespace tern::telemetry {

DaemonTelemetry::DaemonTelemetry(const TelemetryOptions& options, Clock clock,
                                 const NodeStatus& initial)
    : options_(options), clock_(std::move(clock)) {
  if (!options_.http_bind.empty()) {
    service_ = std::make_unique<TelemetryService>(clock_, options_.stale_after_seconds);
    service_->publish(initial);
    url_ = "http://" + service_->serve(options_.http_bind);
    spdlog::info("telemetry endpoint on {} (/metrics /status /healthz)", url_);
    if (!options_.http_url_file.empty()) {
      writeFileAtomically(options_.http_url_file, url_ + '\n');
    }
  } else if (!options_.http_url_file.empty()) {
    throw std::invalid_argument("--http-url-file needs an HTTP address (--http)");
  }
  if (systemd_.enabled()) {
    spdlog::info("systemd notifications on{}",
                 systemd_.watchdogSeconds() > 0
                     ? " (watchdog every " + std::to_string(systemd_.watchdogSeconds()) + " s)"
                     : std::string());
  }
}

DaemonTelemetry::~DaemonTelemetry() = default;

void DaemonTelemetry::ready(const std::string& status) {
  last_systemd_status_ = status;
  systemd_.ready(status);
  tick();
}

void DaemonTelemetry::tick() {
  if (service_) service_->heartbeat();
  systemd_.watchdog(clock_());
}

bool DaemonTelemetry::publishDue() const {
  return clock_() - last_publish_ >= options_.publish_every_seconds;
}

void DaemonTelemetry::publish(const NodeStatus& status, const std::string& systemd_status) {
  last_publish_ = clock_();
  if (service_) service_->publish(status);
  // At most one STATUS= per publication period: a fast cluster closes hundreds of rounds a
  // second and systemd only needs the current line; the periodic publication sends the latest.
  if (systemd_status != last_systemd_status_ &&
      last_publish_ - last_status_at_ >= options_.publish_every_seconds) {
    last_systemd_status_ = systemd_status;
    last_status_at_ = last_publish_;
    systemd_.status(systemd_status);
  }
}

void DaemonTelemetry::stopping(const std::string& status) { systemd_.stopping(status); }

void DaemonTelemetry::setDegraded(const std::string& reason) {
  if (service_) service_->setDegraded(reason);
}

}  // namespace tern::telemetry
