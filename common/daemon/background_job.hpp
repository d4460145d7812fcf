#pragma once
// One computation at a time off the event loop's thread (a gradient, an evaluation), so that the
// loop keeps sending heartbeats and pinging the watchdog meanwhile. The job's end wakes the loop
// through a file descriptor it polls next to its sockets; its result is handed back on the loop's
// thread. One thread serves every job of the object's life (no thread is started per job).
// Mains use it through PollLoop::startJob (poll_loop.hpp), not directly.
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
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

  // Starts `work` on the job thread. Throws std::logic_error if a job is already running or its
  // result has not been collected yet.
  void start(Work work);
  // Whether a job was started and its result not yet collected.
  bool busy() const { return busy_; }
  // Readable (for poll) from the moment the job has finished until collect().
  int fd() const { return fd_; }
  // The finished job's continuation (empty while it runs, or when none was started); an
  // exception the job threw is thrown here, on the owner's thread.
  Continuation collect();
  // Asks a running job to stop (its stop_token); does not wait.
  void requestStop();

 private:
  // The job thread: runs each job handed over, until the object goes.
  void serve(std::stop_token shutdown);

  int fd_ = -1;        // eventfd, one count per finished job
  bool busy_ = false;  // the owner's thread only
  std::atomic<bool> finished_{false};
  std::mutex mutex_;  // guards what follows
  std::condition_variable_any wake_;
  std::optional<Work> pending_;  // handed over, not yet taken by the job thread
  std::stop_source job_stop_;    // the current job's
  Continuation continuation_;
  std::exception_ptr error_;
  std::jthread thread_;  // last: it starts once everything it uses exists
};

}  // namespace tern::daemon
