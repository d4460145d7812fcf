#pragma once
// One simulator run of the DAGC reproduction and what it measured: the first evaluated round
// at which the test accuracy reached the target (rounds and simulated seconds), the accuracy and
// upload bytes when the run ended, and the evaluated points on the way.
#include <cstdint>
#include <optional>
#include <vector>

#include "experiment.hpp"

namespace tern::bench::dagc {

struct EvalPoint {
  uint64_t rounds = 0;   // rounds completed
  double seconds = 0.0;  // simulated seconds since training started
  double accuracy = 0.0;
  uint64_t upload_bytes = 0;
};

struct RunResult {
  RunSpec spec;
  std::optional<uint64_t> rounds_to_target;
  std::optional<double> seconds_to_target;
  double final_accuracy = 0.0;
  uint64_t upload_bytes = 0;  // at the end of the run, probes included when links are measured
  uint64_t rounds_run = 0;
  double sim_seconds = 0.0;
  double wall_seconds = 0.0;
  uint64_t replica_mismatches = 0;
  std::vector<uint32_t> final_caps;  // by worker id
  std::vector<double> final_shares;
  std::vector<double> final_link_b;  // fitted seconds per packet (0 = not measured)
  std::vector<double> final_link_a;  // fitted fixed seconds per upload (0 = not measured)
  std::vector<EvalPoint> curve;
  double uploadBytesPerRound() const {
    return rounds_run ? double(upload_bytes) / double(rounds_run) : 0.0;
  }
};

// Runs to the target accuracy or to spec.max_rounds, whichever comes first.
RunResult runOne(const RunSpec& spec, const Training& training, const DataFiles& data);

}  // namespace tern::bench::dagc
