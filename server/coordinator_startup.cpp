#include "server/coordinator_startup.hpp"

#include <spdlog/spdlog.h>

#include <random>

#include "common/daemon/signals.hpp"
#include "common/ml/data_source.hpp"
#include "common/util/durable_file.hpp"
#include "common/util/steady_clock.hpp"
#include "server/checkpoint_file.hpp"
#include "server/model_file.hpp"

namespace tern::server {

std::shared_ptr<const ml::Dataset> loadTestData(config::CoordinatorSettings& s) {
  if (s.model.kind == "external") {
    loadModelFile(s.model_file, s.model);
    spdlog::info("external model from {}: {} values, {}", s.model_file, ml::paramsOf(s.model),
                 ml::describeLayout(s.model.tensors));
    return nullptr;
  }
  std::shared_ptr<const ml::Dataset> test;
  if (!s.test_data.format.empty()) {
    test = std::make_shared<ml::Dataset>(
        daemon::exitIfStoppedDuring([&] { return ml::loadDataset(s.test_data); },
                                    [] {
                                      spdlog::info("stopped while loading the test data: exiting");
                                      spdlog::default_logger()->flush();
                                    }));
    if (s.model.features == 0) s.model.features = uint32_t(test->features());
    // Here, not at the first evaluation, which would end a run already under way.
    ml::requireFitsModel("test_data", s.test_data, *test, s.model);
    spdlog::info("test set: {} rows, {} features", test->rows(), test->features());
  }
  if (s.model.features == 0) {
    throw std::runtime_error("model.features is not set and there is no test_data to infer it");
  }
  return test;
}

namespace {

// optimizer.lr over training.local_lr beyond which a run with local steps is warned about.
constexpr double kOverstepWarning = 2.0;

// A resumed run that had already finished: why, and how to train on.
void warnFinished(const config::CoordinatorSettings& s, const CoordinatorCore& core) {
  const bool at_limit = core.round() >= s.max_rounds;
  const bool at_target = s.target_accuracy > 0 && core.lastAccuracy() >= s.target_accuracy;
  std::string why;
  if (at_limit) why = "max_rounds is " + std::to_string(s.max_rounds);
  if (at_target)
    why += fmt::format("{}it reached target_accuracy {} with {:.4f}", at_limit ? " and " : "",
                       s.target_accuracy, core.lastAccuracy());
  why += at_limit && at_target ? " (raise both to train on"
         : at_limit            ? " (raise it to train on"
                               : " (raise the target above that to train on";
  spdlog::warn(
      "training had already finished at round {}: nothing to do, {}, or remove {} and {} to "
      "start again)",
      core.round(), why, s.checkpoint.path, previousCheckpointPath(s.checkpoint.path));
}

// With local steps a push is the workers' delta over local_lr: a step of optimizer.lr =
// local_lr takes their mean delta as it is (FedAvg). Far above it, rounds overshoot.
void warnIfOverstepping(const config::CoordinatorSettings& s) {
  const double times = s.optimizer.lr / s.training.local_lr;
  if (s.training.local_steps <= 1 || times <= kOverstepWarning) return;
  spdlog::warn(
      "optimizer.lr {:g} is {:g} times training.local_lr {:g}: with local_steps {} each round "
      "moves the model {:g} times the workers' mean delta (optimizer.lr = local_lr with "
      "momentum 0 averages them as FedAvg does)",
      s.optimizer.lr, times, s.training.local_lr, s.training.local_steps, times);
}

}  // namespace

StartedCore startCore(config::CoordinatorSettings& s, bool evaluates) {
  warnIfOverstepping(s);
  auto model = ml::makeModel(s.model);
  if (!s.max_message_bytes_given) {
    s.max_message_bytes = config::autoMaxMessageBytes(model->numParams());
    spdlog::info("max_message_bytes: {} (auto, from the model)", s.max_message_bytes);
  }
  std::random_device rd;
  uint64_t session = (uint64_t(rd()) << 32) ^ rd();
  // A resumed coordinator takes a new session: every worker's old-session message is refused
  // with UNKNOWN_SESSION, so each re-joins and takes the checkpointed model in full.
  if (!s.checkpoint.path.empty()) {
    auto loaded = loadCheckpoint(s.checkpoint.path, coordinatorOptions(s));
    checkWritable(s.checkpoint.path);
    if (loaded) {
      StartedCore started{
          std::make_unique<CoordinatorCore>(coordinatorOptions(s), std::move(model), evaluates,
                                            session, std::move(loaded->state), steadySeconds()),
          true, loaded->fell_back};
      spdlog::info(
          "resumed from checkpoint {} at round {}",
          loaded->fell_back ? previousCheckpointPath(s.checkpoint.path) : s.checkpoint.path,
          started.core->round());
      if (started.core->finished()) warnFinished(s, *started.core);
      return started;
    }
  }
  return {std::make_unique<CoordinatorCore>(coordinatorOptions(s), std::move(model), evaluates,
                                            session, steadySeconds()),
          false};
}

}  // namespace tern::server
