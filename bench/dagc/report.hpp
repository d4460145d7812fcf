#pragma once
// Output of the DAGC reproduction: the per-run CSV, the summary table (means over seeds and the
// reduction in rounds against uniform) and a gnuplot PNG. A seed that missed the target counts
// at its rounds limit (and its simulated time at the end of the run) in the means, which are
// then lower bounds and printed with ">=".
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "runner.hpp"

namespace tern::bench::dagc {

// Columns: setup,sr,mean_ratio,method,seed,rounds_to_target,sim_seconds_to_target,
// final_accuracy,upload_bytes (empty cells when the target was not reached).
void writeCsv(const std::string& path, const std::vector<RunResult>& runs);

// Reads what writeCsv wrote back into results for the summary and the plot. The CSV holds no
// run length or final time of a miss: a miss counts at rounds_limit(mean_ratio) rounds and at
// 0 simulated seconds. The worker count and target follow from the setup and the mean ratio as
// the bench sets them. Throws std::runtime_error on a file that does not parse.
std::vector<RunResult> readCsv(const std::string& path,
                               const std::function<uint64_t(double)>& rounds_limit);

// Every evaluated point of every run: setup,sr,mean_ratio,method,seed,rounds,sim_seconds,
// accuracy,upload_bytes.
void writeCurves(const std::string& path, const std::vector<RunResult>& runs);

void printSummary(std::ostream& out, const std::vector<RunResult>& runs);

// Returns false (after printing why on `log`) when gnuplot is missing or fails.
bool writePlot(const std::string& png, const std::vector<RunResult>& runs, std::ostream& log);

}  // namespace tern::bench::dagc
