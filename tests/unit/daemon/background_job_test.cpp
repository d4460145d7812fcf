// One job at a time off the owner's thread: every job of a BackgroundJob runs on the same thread
// (none is started per job), its result comes back through collect() once the fd says so, a
// stop reaches only the running job, and an exception is rethrown on the owner's thread.
#include "common/daemon/background_job.hpp"

#include <doctest/doctest.h>
#include <poll.h>

#include <memory>
#include <set>
#include <stdexcept>
#include <thread>

using tern::daemon::BackgroundJob;

namespace {

// Waits (at most 5 s) for the job's fd, then collects; fails the test on a timeout.
BackgroundJob::Continuation waitAndCollect(BackgroundJob& job) {
  pollfd p{job.fd(), POLLIN, 0};
  REQUIRE(poll(&p, 1, 5000) == 1);
  return job.collect();
}

}  // namespace

TEST_CASE("every job of a background job runs on one thread that is not the owner's") {
  BackgroundJob job;
  std::set<std::thread::id> threads;
  for (int i = 0; i < 20; ++i) {
    int result = -1;
    job.start([&, i](std::stop_token) -> BackgroundJob::Continuation {
      threads.insert(std::this_thread::get_id());
      return [&result, i] { result = i; };
    });
    CHECK(job.busy());
    CHECK_THROWS_AS(job.start([](std::stop_token) { return BackgroundJob::Continuation{}; }),
                    std::logic_error);
    auto done = waitAndCollect(job);
    REQUIRE(done);
    done();
    CHECK(result == i);
    CHECK_FALSE(job.busy());
  }
  CHECK(threads.size() == 1);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("a stop ends the running job only and an exception comes back to the owner") {
  BackgroundJob job;
  job.start([](std::stop_token stop) -> BackgroundJob::Continuation {
    while (!stop.stop_requested()) std::this_thread::yield();
    return [] {};
  });
  job.requestStop();
  CHECK(waitAndCollect(job));
  // The next job gets a fresh token: it runs to its end.
  bool stopped_at_start = true;
  job.start([&](std::stop_token stop) -> BackgroundJob::Continuation {
    stopped_at_start = stop.stop_requested();
    return [] {};
  });
  CHECK(waitAndCollect(job));
  CHECK_FALSE(stopped_at_start);
  job.start([](std::stop_token) -> BackgroundJob::Continuation {
    throw std::runtime_error("compute failed");
  });
  pollfd p{job.fd(), POLLIN, 0};
  REQUIRE(poll(&p, 1, 5000) == 1);
  CHECK_THROWS_WITH_AS(job.collect(), "compute failed", std::runtime_error);
  CHECK_FALSE(job.busy());
}

TEST_CASE("a background job going away stops its running job and waits for it") {
  std::atomic<bool> ended{false};
  {
    BackgroundJob job;
    job.start([&](std::stop_token stop) -> BackgroundJob::Continuation {
      while (!stop.stop_requested()) std::this_thread::yield();
      ended = true;
      return {};
    });
  }
  CHECK(ended.load());
}

TEST_CASE("what a job's work holds is let go before its result can be collected") {
  BackgroundJob job;
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  job.start(
      [held = std::move(held)](std::stop_token) -> BackgroundJob::Continuation { return [] {}; });
  auto done = waitAndCollect(job);
  REQUIRE(done);
  CHECK(watch.expired());
}
