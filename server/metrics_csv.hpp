#pragma once
// The per-round metrics CSV written by the coordinator and the simulator, and the one-line
// progress summary. Per-worker values are ';'-joined in worker-id order inside one column.
#include <cstdint>
#include <optional>
#include <string>

#include "server/round_record.hpp"

namespace tern::server {

class MetricsCsv {
 public:
  // Starts the file with the header. Throws std::runtime_error when it cannot be opened.
  explicit MetricsCsv(const std::string& path);
  // A coordinator resumed at round `resume_round` continues the file: the rows of earlier rounds
  // stay, those of rounds from resume_round on (redone after the restart) are dropped. The kept
  // rows replace the file atomically (a crash or a full disk while they are written leaves the
  // old file whole). A file that is missing, empty or has another header (an older tern) is
  // started afresh, the old one kept as PATH.old. A pipe or device is written on, after a header.
  // A symbolic link's target is the file continued. Throws std::runtime_error when it cannot be
  // read or written.
  MetricsCsv(const std::string& path, uint64_t resume_round);
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;
  // False when the row could not be written (disk full, file gone): the caller reports it, and
  // the next row tries again. A row written in part is cut off again, so the file never holds a
  // torn line that the next row would run on from.
  bool write(const RoundRecord& r);
  // The rows written so far are on disk (fsync): the coordinator calls it before a checkpoint,
  // so that a power loss after the checkpoint cannot leave rounds before it without their rows.
  // False when the fsync failed; true at once for a pipe or device.
  bool sync();
  // Before a run that does not resume: a non-empty file at `path` (an earlier run's record) is
  // kept as PATH.old rather than truncated. True when it did so; throws when the rename fails.
  static bool keepPrevious(const std::string& path);
  static std::string header();
  static std::string row(const RoundRecord& r);

 private:
  // Appends the line; on failure the file is cut back to where it was. False when it failed.
  bool append(const std::string& line);
  // Opens `path` for appending (with `flags`: O_CREAT | O_TRUNC for a fresh file) and writes
  // the header.
  void start(const std::string& path, int flags);
  int fd_ = -1;
  bool regular_ = false;  // a regular file: syncs reach a disk (a pipe or device has none)
};

std::string progressLine(const RoundRecord& r);
// What a run moved: its pushes, its broadcasts to the workers, and its pushes had they been dense.
struct RunBytes {
  uint64_t upload = 0, download = 0, full = 0;
};
std::string finalLine(uint64_t rounds, std::optional<double> test_accuracy, const RunBytes& bytes);

}  // namespace tern::server
