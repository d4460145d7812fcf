#include "common/telemetry/systemd_notifier.hpp"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>

namespace tern::telemetry {

SystemdNotifier::SystemdNotifier() {
  // Read once at start-up (the configuration rule: no environment lookups on the data path).
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket && *socket;
  uint64_t usec = 0;
  // unset_environment = 0: children (none today) would inherit the same contract.
  if (sd_watchdog_enabled(0, &usec) > 0) watchdog_seconds_ = double(usec) / 1e6;
}

void SystemdNotifier::send(const std::string& state) {
  if (!enabled_) return;
  int rc = sd_notify(0, state.c_str());
  if (rc < 0) spdlog::debug("sd_notify failed: {}", rc);
}

void SystemdNotifier::ready(const std::string& status) {
  send(status.empty() ? "READY=1" : "READY=1\nSTATUS=" + status);
}

void SystemdNotifier::status(const std::string& status) { send("STATUS=" + status); }

void SystemdNotifier::stopping(const std::string& status) {
  send(status.empty() ? "STOPPING=1" : "STOPPING=1\nSTATUS=" + status);
}

void SystemdNotifier::watchdog(double now_seconds) {
  if (!enabled_ || watchdog_seconds_ <= 0.0) return;
  if (now_seconds - last_ping_ < watchdog_seconds_ / 2) return;
  last_ping_ = now_seconds;
  send("WATCHDOG=1");
}

}  // namespace tern::telemetry
