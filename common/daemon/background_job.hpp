#pragma once
// One computation at a time off the event loop's thread (a gradient, an evaluation), so that the
// loop keeps sending heartbeats and pinging the watchdog meanwhile. The job's end wakes the loop
// through a file descriptor it polls next to its sockets; its result is handed back on the loop's
// thread. Mains use it through PollLoop::startJob (poll_loop.hpp), not directly.
#include <atomic>
#include <exception>
#include <functional>
#include <stop_token>
#include <thread>

namespace tern::daemon {

class BackgroundJob {
 public:
  // What a finished job leaves for the owner's thread to run (it delivers the result).
  using Continuation = std::function<void()>;
  // The job itself: runs on its own thread, should end early once `stop` is requested.
  using Work = std::function<Continuation(std::stop_token stop)>;

  BackgroundJob();
  // A job still running is asked to stop and waited for.
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // Starts `work` on a new thread. Throws std::logic_error if a job is already running or its
  // result has not been collected yet.
  void start(Work work);
  // Whether a job was started and its result not yet collected.
  bool busy() const { return thread_.joinable(); }
  // Readable (for poll) from the moment the job has finished until collect().
  int fd() const { return fd_; }
  // The finished job's continuation (empty while it runs, or when none was started); an
  // exception the job threw is thrown here, on the owner's thread.
  Continuation collect();
  // Asks a running job to stop (its stop_token); does not wait.
  void requestStop();

 private:
  int fd_ = -1;  // eventfd, one count per finished job
  std::jthread thread_;
  std::atomic<bool> finished_{false};
  Continuation continuation_;
  std::exception_ptr error_;
};

}  // namespace tern::daemon
