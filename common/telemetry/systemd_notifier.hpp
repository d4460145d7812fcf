#pragma once
// Tells systemd how a daemon is doing (sd_notify(3), for units with Type=notify): READY=1 once it
// serves, STATUS= lines shown by `systemctl status`, WATCHDOG=1 pings from the event loop so a
// wedged loop gets restarted (WatchdogSec=), STOPPING=1 on the way out. Without NOTIFY_SOCKET
// (not started by systemd) every call is a cheap no-op.
#include <string>

namespace tern::telemetry {

class SystemdNotifier {
 public:
  SystemdNotifier();

  // True when the service manager listens (NOTIFY_SOCKET was set at start-up).
  bool enabled() const { return enabled_; }
  // Watchdog interval requested by the manager (WATCHDOG_USEC), 0 when none.
  double watchdogSeconds() const { return watchdog_seconds_; }

  void ready(const std::string& status = "");
  void status(const std::string& status);
  void stopping(const std::string& status = "");
  // Call on every event loop iteration: pings at half the interval, as sd_watchdog_enabled(3)
  // recommends, so one late iteration does not trip the watchdog.
  void watchdog(double now_seconds);

 private:
  void send(const std::string& state);
  bool enabled_ = false;
  double watchdog_seconds_ = 0.0;
  double last_ping_ = -1e300;
};

}  // namespace tern::telemetry
