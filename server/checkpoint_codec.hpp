#pragma once
// The coordinator's checkpoint: encode() serializes a state value, decode() checks the bytes
// against the configuration and returns the state value the core is rebuilt from.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/coordinator_options.hpp"
#include "server/membership.hpp"

namespace tern::server {

struct CheckpointState {
  uint64_t session = 0;
  uint64_t round = 0;  // the round being collected (its pushes are not kept: it is redone)
  ml::ModelSpec model;
  uint64_t training_seed = 0;
  std::vector<float> parameters, velocity;
  std::vector<float> download_residual;  // empty: every change has been broadcast
  uint32_t next_worker_id = 0;
  std::map<uint32_t, Worker> workers;  // record, samples, instance and push price of each
  std::optional<allocation::PushPrice> mean_price;
  std::string allocation_method;
  uint64_t rounds_since_plan = 0;
  Counters counters;
  double last_accuracy = 0.0;  // the last evaluation's (0 before the first)
  bool accuracy_known = false;
  double last_train_loss = 0.0;
  double elapsed_seconds = 0.0;  // training time reached
  bool finished = false;
};

// The checkpoint file's format: a header (magic, this number, the body's length), the body, and
// a checksum of every byte before it (docs/reliability.md). Files of any other format are refused.
inline constexpr uint32_t kCheckpointFileFormat = 2;
// What a checkpoint may hold besides its two model-sized vectors (the worker table, counters):
// with them, the largest file a coordinator reads as its checkpoint.
inline constexpr size_t kCheckpointOverheadLimit = size_t(64) << 20;

// The checkpoint file's bytes of `state`.
std::string encodeCheckpoint(const CheckpointState& state);
// Throws std::runtime_error when the bytes are larger than checkpointSizeLimit, are damaged
// anywhere (header, body or checksum; cut), are of another format, or do not fit the configured
// model. Workers with a name a join would refuse are dropped (logged).
CheckpointState decodeCheckpoint(const std::string& bytes, const CoordinatorOptions& options);

// The file around a serialized wire::Checkpoint, and back (throws as decodeCheckpoint does on
// damage or another format).
std::string sealCheckpoint(const std::string& body);
std::string unsealCheckpoint(const std::string& bytes);
// The largest checkpoint file of `model` a coordinator reads.
size_t checkpointSizeLimit(const ml::ModelSpec& model);

}  // namespace tern::server
