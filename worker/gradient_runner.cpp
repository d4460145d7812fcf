#include "worker/gradient_runner.hpp"

#include <chrono>

namespace tern::worker {

GradientRunner::GradientRunner(std::shared_ptr<const ml::Dataset> shard, std::function<bool()> stop)
    : stop_(std::move(stop)),
      trainer_(std::move(shard), [this] { return abandoned_.load() || (stop_ && stop_()); }) {}

GradientRunner::~GradientRunner() { abandon(); }

void GradientRunner::launch(GradientRequest request) {
  abandoned_ = false;
  running_ = std::async(std::launch::async,
                        [this, r = std::move(request)] { return trainer_.gradient(r); });
}

void GradientRunner::submit(GradientRequest request) {
  if (!busy()) return launch(std::move(request));
  abandoned_ = true;
  next_ = std::move(request);
}

std::optional<GradientResult> GradientRunner::poll() {
  if (!busy() || running_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return std::nullopt;
  auto result = running_.get();
  if (next_) {
    launch(std::move(*next_));
    next_.reset();
    return std::nullopt;  // the finished one answered a request no longer outstanding
  }
  return result;
}

void GradientRunner::abandon() {
  next_.reset();
  if (!busy()) return;
  abandoned_ = true;
  running_.wait();
  running_ = {};
}

}  // namespace tern::worker
