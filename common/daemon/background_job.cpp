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
}

BackgroundJob::~BackgroundJob() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  close(fd_);
}

void BackgroundJob::start(Work work) {
  if (busy()) throw std::logic_error("a background job is already running");
  finished_.store(false);
  thread_ = std::jthread([this, work = std::move(work)](std::stop_token stop) {
    try {
      continuation_ = work(stop);
    } catch (...) {
      error_ = std::current_exception();
    }
    finished_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    // Cannot fail short of a counter overflow: one count per job, read back by collect().
    [[maybe_unused]] auto n = write(fd_, &one, sizeof one);
  });
}

BackgroundJob::Continuation BackgroundJob::collect() {
  if (!busy() || !finished_.load(std::memory_order_acquire)) return {};
  thread_.join();
  uint64_t count = 0;
  [[maybe_unused]] auto n = read(fd_, &count, sizeof count);
  if (auto error = std::exchange(error_, nullptr)) {
    continuation_ = nullptr;
    std::rethrow_exception(error);
  }
  return std::exchange(continuation_, nullptr);
}

void BackgroundJob::requestStop() {
  if (thread_.joinable()) thread_.request_stop();
}

}  // namespace tern::daemon
