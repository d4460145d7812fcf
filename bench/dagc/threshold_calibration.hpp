#pragma once
// Picks lambda_bar for a hard-threshold method (uniform-ht, dagc-a) so that its upload traffic
// matches the top-k budget it is compared with. A threshold does not fix how much is sent
// (docs/dagc.md, "DAGC-A"), so the match is measured: short pilot runs on a calibration seed
// that no reported run uses, a top-k uniform pilot for the reference bytes per round, then a
// secant search on log(bytes) against log(lambda_bar), which is close to linear.
#include <cstdint>
#include <string>

#include "experiment.hpp"

namespace tern::bench::dagc {

struct Calibration {
  double lambda_bar = 0.0;
  double bytes_per_round = 0.0;            // of the threshold method at lambda_bar, in the pilot
  double reference_bytes_per_round = 0.0;  // of uniform top-k in the same pilot
  int pilots = 0;                          // threshold pilot runs spent
};

struct CalibrationOptions {
  uint64_t seed = 1000;
  uint64_t rounds = 300;
  double tolerance = 0.05;  // relative traffic mismatch accepted
  int max_pilots = 7;
};

// Upload bytes per round of uniform top-k at run's mean ratio, in a pilot.
double referenceBytesPerRound(RunSpec run, const Training& training, const DataFiles& data,
                              const CalibrationOptions& options);

// run.method must be a threshold method; run's setup, skew and workers are kept.
Calibration calibrateThreshold(RunSpec run, double reference_bytes_per_round,
                               const Training& training, const DataFiles& data,
                               const CalibrationOptions& options);

}  // namespace tern::bench::dagc
