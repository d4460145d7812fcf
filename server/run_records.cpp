#include "server/run_records.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "common/util/steady_clock.hpp"

namespace tern::server {

RunRecords::RunRecords(const config::CoordinatorSettings& s, std::optional<uint64_t> resumed_at)
    : checkpoint_path_(s.checkpoint.path),
      csv_path_(s.metrics_csv),
      checkpoint_writer_(s.checkpoint.path) {
  if (csv_path_.empty()) return;
  // A resumed run continues its CSV (rows of the rounds it redoes are dropped).
  if (!resumed_at && MetricsCsv::keepPrevious(csv_path_)) {
    spdlog::info("metrics CSV {} held an earlier run: kept as {}.old", csv_path_, csv_path_);
  }
  csv_ = resumed_at ? std::make_unique<MetricsCsv>(csv_path_, *resumed_at)
                    : std::make_unique<MetricsCsv>(csv_path_);
}

void RunRecords::report(const std::vector<RoundRecord>& closed) {
  for (const auto& r : closed) {
    if (csv_ && !csv_->write(r)) {
      // Training goes on; the record has a gap, said once and then every 100 rows lost.
      if (csv_rows_lost_++ % 100 == 0) {
        spdlog::error("metrics CSV {}: cannot write the row of round {} ({} row(s) lost so far)",
                      csv_path_, r.round, csv_rows_lost_);
      }
    }
    if (spdlog::should_log(spdlog::level::info)) spdlog::info("{}", progressLine(r));
  }
}

bool RunRecords::saveCheckpoint(const CoordinatorCore& core) {
  if (checkpoint_path_.empty()) return true;
  // The rows of the rounds before the checkpoint reach the disk first: after a power loss the
  // resumed run would not redo those rounds, and their rows would be missing for good.
  if (csv_ && !csv_->sync()) {
    spdlog::error("metrics CSV {}: cannot sync its rows to disk: {}", csv_path_,
                  std::strerror(errno));
  }
  checkpoint_failed_ =
      !checkpoint_writer_.write(core.checkpoint(steadySeconds()), core.round(), steadySeconds());
  return !checkpoint_failed_;
}

}  // namespace tern::server
