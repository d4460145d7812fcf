#pragma once
// Fulfils the core's gradient requests on one compute thread, so that the daemon's protocol loop
// (heartbeats, acks, the watchdog) never waits for a gradient. One computation at a time: a new
// request while one runs abandons the running one and starts when it has stopped.
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <optional>

#include "worker/trainer.hpp"

namespace tern::worker {

class GradientRunner {
 public:
  // stop: the daemon's stop flag, asked between chunks and local steps (true abandons).
  GradientRunner(std::shared_ptr<const ml::Dataset> shard, std::function<bool()> stop);
  ~GradientRunner();

  void submit(GradientRequest request);
  // The finished computation's result, if one finished since (nullopt while computing, idle, or
  // when it was abandoned).
  std::optional<GradientResult> poll();
  // Abandons what runs and what waits, and returns once the compute thread is idle.
  void abandon();
  bool busy() const { return running_.valid(); }

 private:
  void launch(GradientRequest request);

  std::function<bool()> stop_;
  std::atomic<bool> abandoned_{false};
  ShardTrainer trainer_;
  std::future<std::optional<GradientResult>> running_;
  std::optional<GradientRequest> next_;
};

}  // namespace tern::worker
