#include "common/daemon/background_job.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace tern::daemon {

BackgroundJob::BackgroundJob() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::jthread([this](std::stop_token shutdown) { serve(shutdown); });
}

BackgroundJob::~BackgroundJob() {
  {
    std::lock_guard lock(mutex_);
    job_stop_.request_stop();
  }
  thread_.request_stop();
  thread_.join();
  close(fd_);
}

void BackgroundJob::serve(std::stop_token shutdown) {
  while (true) {
    std::optional<Work> work;
    std::stop_token stop;
    {
      std::unique_lock lock(mutex_);
      if (!wake_.wait(lock, shutdown, [this] { return pending_.has_value(); })) return;
      work = std::exchange(pending_, std::nullopt);
      stop = job_stop_.get_token();
    }
    Continuation done;
    std::exception_ptr error;
    try {
      done = (*work)(stop);
    } catch (...) {
      error = std::current_exception();
    }
    // What the work held (a trainer's lent parameters) is let go before its result is published:
    // whoever collects the result may then take them back.
    work.reset();
    {
      std::lock_guard lock(mutex_);
      continuation_ = std::move(done);
      error_ = std::move(error);  // the job thread keeps no reference to it
    }
    finished_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    // Cannot fail short of a counter overflow: one count per job, read back by collect().
    [[maybe_unused]] auto n = write(fd_, &one, sizeof one);
  }
}

void BackgroundJob::start(Work work) {
  if (busy_) throw std::logic_error("a background job is already running");
  finished_.store(false);
  {
    std::lock_guard lock(mutex_);
    job_stop_ = std::stop_source();
    pending_ = std::move(work);
  }
  busy_ = true;
  wake_.notify_one();
}

BackgroundJob::Continuation BackgroundJob::collect() {
  if (!busy_ || !finished_.load(std::memory_order_acquire)) return {};
  busy_ = false;
  uint64_t count = 0;
  [[maybe_unused]] auto n = read(fd_, &count, sizeof count);
  std::lock_guard lock(mutex_);
  if (auto error = std::exchange(error_, nullptr)) {
    continuation_ = nullptr;
    std::rethrow_exception(error);
  }
  return std::exchange(continuation_, nullptr);
}

void BackgroundJob::requestStop() {
  if (!busy_) return;
  std::lock_guard lock(mutex_);
  job_stop_.request_stop();
}

}  // namespace tern::daemon
