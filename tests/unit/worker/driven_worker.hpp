#pragma once
// A WorkerCore driven as the simulator drives it: each event at the test's clock, and a gradient
// request fulfilled at once by the built-in trainer, its push returned with the event's messages.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/trainer.hpp"
#include "worker/worker_core.hpp"

namespace tern::testing {

class DrivenWorker : public worker::WorkerCore {
 public:
  DrivenWorker(const config::WorkerSettings& settings, std::shared_ptr<const ml::Dataset> shard,
               std::function<double()> clock, uint64_t instance = 0)
      : WorkerCore(worker::workerOptions(settings), shard, instance),
        clock_(std::move(clock)),
        trainer_(shard, [this] { return stop_check_ && stop_check_(); }) {}

  // The daemon's stop flag as the trainer sees it: true abandons the gradient (nothing is sent).
  void setStopCheck(std::function<bool()> check) { stop_check_ = std::move(check); }
  // Called with each gradient request: a non-empty answer fails it with that text, as an
  // external trainer's failure would.
  void setFailure(std::function<std::string(const worker::GradientRequest&)> failure) {
    failure_ = std::move(failure);
  }
  std::vector<Message> start() { return fulfil(WorkerCore::start(clock_())); }
  std::vector<Message> onMessage(const Message& m, size_t bytes) {
    return fulfil(WorkerCore::onMessage(m, bytes, clock_()));
  }
  std::vector<Message> onTick() { return fulfil(WorkerCore::onTick(clock_())); }
  void onSent(const Message& m, size_t bytes) { WorkerCore::onSent(m, bytes, clock_()); }
  std::vector<Message> stop(const std::string& reason) {
    return WorkerCore::stop(reason, clock_());
  }
  std::vector<Message> afterStop(const Message& m, size_t bytes) {
    return WorkerCore::afterStop(m, bytes, clock_());
  }
  void connectionUp() { WorkerCore::connectionUp(clock_()); }

 private:
  std::vector<Message> fulfil(worker::Effects e) {
    if (!e.compute) return std::move(e.send);
    std::optional<worker::GradientResult> result;
    if (std::string why = failure_ ? failure_(*e.compute) : ""; !why.empty()) {
      result.emplace();
      result->request_id = e.compute->id;
      result->failure = why;
    } else {
      result = trainer_.gradient(*e.compute);
    }
    if (!result) return std::move(e.send);  // abandoned: the driver is stopping
    for (auto& m : WorkerCore::onGradient(*result, clock_()).send) e.send.push_back(std::move(m));
    return std::move(e.send);
  }

  std::function<double()> clock_;
  std::function<bool()> stop_check_;
  std::function<std::string(const worker::GradientRequest&)> failure_;
  worker::ShardTrainer trainer_;
};

}  // namespace tern::testing
