#pragma once
// The coordinator core driven as a daemon drives it, on the test's clock: each event is handed
// the clock's time, evaluations are answered at once, closed rounds go to on_round, and a due
// checkpoint is remembered until checkpointWritten(). Tests keep the event-in, messages-out view.
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/checkpoint_codec.hpp"
#include "server/coordinator_core.hpp"
#include "server/inline_evaluation.hpp"

namespace tern::testing {

class DrivenCoordinator : public server::CoordinatorCore {
 public:
  using Clock = std::function<double()>;

  DrivenCoordinator(const config::CoordinatorSettings& settings, std::unique_ptr<ml::Model> model,
                    std::shared_ptr<const ml::Dataset> test, uint64_t session, Clock clock)
      : CoordinatorCore(server::coordinatorOptions(settings), std::move(model), test != nullptr,
                        session, clock()),
        test_(std::move(test)),
        clock_(std::move(clock)) {}
  DrivenCoordinator(const config::CoordinatorSettings& settings, std::unique_ptr<ml::Model> model,
                    std::shared_ptr<const ml::Dataset> test, uint64_t session, Clock clock,
                    server::CheckpointState restored)
      : CoordinatorCore(server::coordinatorOptions(settings), std::move(model), test != nullptr,
                        session, std::move(restored), clock()),
        test_(std::move(test)),
        clock_(std::move(clock)) {}

  static std::unique_ptr<DrivenCoordinator> restore(const config::CoordinatorSettings& settings,
                                                    std::unique_ptr<ml::Model> model,
                                                    std::shared_ptr<const ml::Dataset> test,
                                                    uint64_t session, Clock clock,
                                                    const std::string& bytes) {
    server::CheckpointState state =
        server::decodeCheckpoint(bytes, server::coordinatorOptions(settings));
    return std::make_unique<DrivenCoordinator>(settings, std::move(model), std::move(test), session,
                                               std::move(clock), std::move(state));
  }

  std::vector<Outgoing> onMessage(const std::string& peer, const Message& msg, size_t wire_bytes,
                                  double received_at) {
    return drive(handleMessage(peer, msg, wire_bytes, received_at, clock_()));
  }
  std::vector<Outgoing> onMalformed(const std::string& peer, const std::string& reason) {
    return drive(handleMalformed(peer, reason, clock_()));
  }
  std::vector<Outgoing> onTick() { return drive(handleTimeout(clock_())); }
  std::vector<Outgoing> stop() { return drive(handleStop(clock_())); }
  double nextWakeup() const { return nextTimeout(clock_()); }
  std::string checkpoint() const { return CoordinatorCore::checkpoint(clock_()); }
  bool checkpointDue() const { return checkpoint_due_; }
  void checkpointWritten() { checkpoint_due_ = false; }
  // Runs between two chunks of rows of an evaluation (chunk_rows 0 = ml::chunkRows).
  void setBetweenChunks(std::function<void()> between, size_t chunk_rows = 0) {
    between_ = std::move(between);
    chunk_rows_ = chunk_rows;
  }
  // Called with every closed round.
  std::function<void(const server::RoundRecord&)> on_round;

 private:
  std::vector<Outgoing> drive(server::Effects effects) {
    effects = server::evaluateInline(*this, std::move(effects), test_.get(), clock_, between_,
                                     chunk_rows_);
    checkWakeup();
    checkpoint_due_ = checkpoint_due_ || effects.checkpoint_due;
    if (on_round) {
      for (const auto& r : effects.closed_rounds) on_round(r);
    }
    return std::move(effects.messages);
  }

  // After every event the kept wake-ups agree with a walk over every worker.
  void checkWakeup() const {
    const double now = clock_();
    const double kept = nextTimeout(now), walked = nextTimeoutByWalk(now);
    if (kept != walked)
      throw std::logic_error("nextTimeout " + std::to_string(kept) +
                             " but a walk over the workers says " + std::to_string(walked));
  }

  std::shared_ptr<const ml::Dataset> test_;
  Clock clock_;
  std::function<void()> between_;
  size_t chunk_rows_ = 0;
  bool checkpoint_due_ = false;
};

}  // namespace tern::testing
