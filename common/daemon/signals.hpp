#pragma once
// SIGTERM/SIGINT (stop) and SIGHUP (reload) as flags the daemons' event loops poll. A main calls
// installSignalHandlers() first thing; PollLoop reads both flags (see poll_loop.hpp).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <utility>

namespace tern::daemon {

inline std::atomic<bool>& stopRequested() {
  static std::atomic<bool> flag{false};
  return flag;
}
inline std::atomic<bool>& reloadRequested() {
  static std::atomic<bool> flag{false};
  return flag;
}

// A second SIGTERM/SIGINT while the first is being honoured (a checkpoint's fsync, a Leave's
// linger, the wait for a welcome) ends the process at once, as the signal's default would: a stop
// that Ctrl-C or a supervisor repeats is not lost.
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

// work() on a second thread while this one watches the stop flag; its result (or its exception).
// A stop before it is done runs on_stop (which says why), flushes stdio and ends the process at
// once with status 0: for start-up work that holds nothing but memory and files opened for
// reading (loading the data), which would otherwise hold the stop back until it ends, past a
// supervisor's stop timeout (systemd then kills the daemon and marks the stop failed).
template <class Work>
auto exitIfStoppedDuring(Work&& work, const std::function<void()>& on_stop) {
  auto result = std::async(std::launch::async, std::forward<Work>(work));
  while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (stopRequested()) {
      on_stop();
      std::fflush(nullptr);
      std::_Exit(0);
    }
  }
  return result.get();
}

}  // namespace tern::daemon
