#pragma once
// The coordinator's checkpoint on disk, in two generations: PATH (the newest) and PATH.prev (the
// one before), so a newest file damaged on disk falls back to the one before it, loudly, and a
// checkpoint that exists but is unusable stops the start instead of starting afresh. Only
// regular files are read, never more than the model's size limit (docs/reliability.md).
#include <cstdint>
#include <optional>
#include <string>

#include "common/daemon/throttle.hpp"
#include "server/checkpoint_codec.hpp"

namespace tern::server {

// Where the generation before the newest is kept, and where a damaged newest is moved aside.
std::string previousCheckpointPath(const std::string& path);
std::string damagedCheckpointPath(const std::string& path);

// The file's bytes; nullopt when nothing is at `path`. Throws std::runtime_error when something
// other than a regular file is there (a symbolic link, dangling or not; a directory, a FIFO, a
// device), when it holds more than `max_bytes`, or when it cannot be read. Never blocks.
std::optional<std::string> readCheckpointFile(const std::string& path, size_t max_bytes);

// Writes `bytes` as the newest generation (atomically, durably); the newest before it becomes
// PATH.prev. Throws std::runtime_error (the path and errno text) when a step fails.
void writeCheckpointGenerations(const std::string& path, const std::string& bytes);

struct LoadedCheckpoint {
  CheckpointState state;
  bool fell_back = false;  // restored from PATH.prev: the newest was damaged or missing
};

// The newest usable generation; nullopt when neither exists (a first start). A damaged newest is
// moved to PATH.damaged and PATH.prev restored instead, with an error logged. Throws
// std::runtime_error when a generation exists but none is usable, naming each one's problem.
std::optional<LoadedCheckpoint> loadCheckpoint(const std::string& path,
                                               const CoordinatorOptions& options);

// The coordinator's checkpoint writes: a failure is logged at once, later ones at most once a
// minute with the count since (a full disk or no file descriptor left fails every round), and
// the failure is kept until a write succeeds: /healthz reports it meanwhile.
class CheckpointWriter {
 public:
  explicit CheckpointWriter(std::string path) : path_(std::move(path)) {}
  // True when written; `round` and `now` (seconds) only for the log.
  bool write(const std::string& bytes, uint64_t round, double now);
  // The last write's failure ("" after a success or before any write).
  const std::string& failure() const { return failure_; }
  uint64_t failures() const { return failures_; }  // writes failed, in all

 private:
  std::string path_;
  std::string failure_;
  uint64_t failures_ = 0;
  uint64_t failures_logged_ = 0;
  daemon::Throttle log_{60.0};
};

}  // namespace tern::server
