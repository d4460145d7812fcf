#pragma once
// SIGTERM/SIGINT (stop) and SIGHUP (reload) as flags the daemons' event loops poll.
#include <atomic>
#include <csignal>

namespace tern {

inline std::atomic<bool>& stopRequested() {
  static std::atomic<bool> flag{false};
  return flag;
}
inline std::atomic<bool>& reloadRequested() {
  static std::atomic<bool> flag{false};
  return flag;
}

inline void installSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = [](int sig) {
    if (sig == SIGHUP) {
      reloadRequested() = true;
    } else {
      stopRequested() = true;
    }
  };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

}  // namespace tern
