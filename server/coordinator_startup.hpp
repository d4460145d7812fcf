#pragma once
// The coordinator's start: its test set and its core, new or resumed from the checkpoint.
#include <memory>

#include "common/config/settings.hpp"
#include "common/ml/dataset.hpp"
#include "server/coordinator_core.hpp"

namespace tern::server {

// The test set (none without test_data), its features given to the model when unset; a stop
// while it loads ends the process. Throws when the model has no feature count.
std::shared_ptr<const ml::Dataset> loadTestData(config::CoordinatorSettings& s);

struct StartedCore {
  std::unique_ptr<CoordinatorCore> core;
  bool resumed = false;    // restored from the checkpoint
  bool fell_back = false;  // from its previous generation: the newest was unusable
};

// The core under a new random session: restored from the checkpoint if there is one (a run
// already finished is warned about), else new. Throws when a checkpoint exists but neither of
// its generations is usable, or its path is not a regular file or cannot be written. Resolves
// `max_message_bytes: auto` in s from the model it makes.
StartedCore startCore(config::CoordinatorSettings& s, bool evaluates);

}  // namespace tern::server
