#pragma once
// What the coordinator writes down of a run: the metrics CSV's rows and progress lines of closed
// rounds, and the checkpoint (docs/reliability.md). A failed write never ends the run: it is
// logged at a bounded rate and reported by checkpoints() until a write succeeds.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/settings.hpp"
#include "server/checkpoint_file.hpp"
#include "server/coordinator_core.hpp"
#include "server/metrics_csv.hpp"

namespace tern::server {

class RunRecords {
 public:
  // resumed_at: the round a resumed run continues from (its CSV keeps the rows before it);
  // none for a fresh run, whose CSV starts anew (an earlier run's kept as .old).
  RunRecords(const config::CoordinatorSettings& s, std::optional<uint64_t> resumed_at);
  // Each round's CSV row (a lost row logged once, then every 100) and progress line.
  void report(const std::vector<RoundRecord>& closed);
  // The checkpoint of `core` now, the CSV synced first; false when it could not be written. True
  // without checkpoints.
  bool saveCheckpoint(const CoordinatorCore& core);
  // The last checkpoint attempted was not written.
  bool checkpointFailed() const { return checkpoint_failed_; }
  // Its failures: the last one's reason ("" once one is written) and how many in all.
  const CheckpointWriter& checkpoints() const { return checkpoint_writer_; }

 private:
  std::string checkpoint_path_, csv_path_;
  std::unique_ptr<MetricsCsv> csv_;
  uint64_t csv_rows_lost_ = 0;
  CheckpointWriter checkpoint_writer_;
  bool checkpoint_failed_ = false;
};

}  // namespace tern::server
