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

// A second SIGTERM/SIGINT while the first is being honoured (a long data load, a gradient, a
// checkpoint's fsync) ends the process at once, as the signal's default would: a stop that
// Ctrl-C or a supervisor repeats is not lost.
inline void installSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = [](int sig) {
    if (sig == SIGHUP) {
      reloadRequested() = true;
    } else if (stopRequested().exchange(true)) {
      std::signal(sig, SIG_DFL);  // async-signal-safe, as raise() is
      std::raise(sig);
    }
  };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

}  // namespace tern
