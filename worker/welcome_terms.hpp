#pragma once
// What a coordinator's welcome asks of this worker, checked against its shard and settings before
// anything of it is taken: the model, the training settings, the full model's parameters, and
// how pushes are built under it. A refusal says why and what the worker does next.
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "proto/message.hpp"
#include "worker/local_data.hpp"
#include "worker/push_builder.hpp"

namespace tern::worker {

struct WelcomeRefusal {
  enum class Then {
    rejoin,     // the coordinator's message is at fault: join again
    ask_later,  // a model that does not fit this shard: ask again later (it may be mended)
    give_up,    // the shard itself is at fault: no coordinator can change that
  };
  std::string why;
  Then then = Then::rejoin;
};

template <class T>
using OrRefusal = std::variant<T, WelcomeRefusal>;

// The welcome's model, if this worker's data (its shard, or its external trainer's layout) can
// train it under the welcome's training settings.
OrRefusal<std::shared_ptr<ml::Model>> welcomeModel(const wire::Welcome& w, const LocalData& data);
// The parameters of a welcome carrying the whole model.
OrRefusal<std::vector<float>> welcomeParams(std::span<const uint8_t> payload, size_t num_params);
// How pushes of `dim` coordinates are built under the welcome (its threshold, the shard's
// smoothness, the coordinator's largest message).
OrRefusal<std::unique_ptr<PushBuilder>> welcomePushes(const wire::Welcome& w,
                                                      const PushOptions& options,
                                                      const ml::Model& model,
                                                      const ml::Dataset* shard, uint32_t dim);

}  // namespace tern::worker
