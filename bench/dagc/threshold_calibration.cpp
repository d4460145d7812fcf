#include "threshold_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "runner.hpp"

namespace tern::bench::dagc {
namespace {

RunSpec pilotOf(RunSpec run, const CalibrationOptions& options) {
  run.seed = options.seed;
  run.max_rounds = options.rounds;
  run.target = 0.0;  // a pilot runs its full length
  // Accuracy is not needed; the evaluation a third of the way in marks where the traffic is
  // measured from.
  run.eval_every = std::max<uint64_t>(1, options.rounds / 3);
  // Probes would count as upload: the pilot measures gradient traffic alone.
  run.measure_links = false;
  run.round_overhead_seconds = 0.0;
  return run;
}

// Error feedback starts from an empty residual, so a threshold compressor sends little until the
// residual has built up: the first third of the pilot is warm-up and is not measured.
double bytesPerRound(const RunSpec& pilot, const Training& training, const DataFiles& data) {
  const RunResult r = runOne(pilot, training, data);
  for (const auto& p : r.curve) {
    if (p.rounds == pilot.eval_every && r.rounds_run > p.rounds) {
      return double(r.upload_bytes - p.upload_bytes) / double(r.rounds_run - p.rounds);
    }
  }
  return r.uploadBytesPerRound();
}

// Traffic per round falls roughly like lambda^-0.7 here; the first step assumes that slope and
// later steps measure it.
constexpr double kInitialSlope = 0.7;
constexpr double kMinSlope = 0.2, kMaxSlope = 2.0;
// A step in log(lambda) is capped so a flat stretch cannot throw the search far away.
constexpr double kMaxLogStep = std::log(20.0);

}  // namespace

double referenceBytesPerRound(RunSpec run, const Training& training, const DataFiles& data,
                              const CalibrationOptions& options) {
  run.method = methodByLabel("uniform");
  run.mean_threshold = 0.0;
  return bytesPerRound(pilotOf(run, options), training, data);
}

Calibration calibrateThreshold(RunSpec run, double reference_bytes_per_round,
                               const Training& training, const DataFiles& data,
                               const CalibrationOptions& options) {
  if (!run.method.threshold()) {
    throw std::invalid_argument("calibrateThreshold: " + run.method.label +
                                " is not a threshold method");
  }
  const double goal = std::log(reference_bytes_per_round);
  RunSpec pilot = pilotOf(run, options);
  // A start that scales with the budget: lambda 10 at 0.1%, 1 at 1%.
  double x = std::log(0.01 / run.mean_ratio);
  double prev_x = 0.0, prev_y = 0.0;
  double slope = kInitialSlope;
  Calibration best;
  double best_miss = std::numeric_limits<double>::infinity();
  for (int k = 0; k < options.max_pilots; ++k) {
    pilot.mean_threshold = std::exp(x);
    const double bytes = bytesPerRound(pilot, training, data);
    const double y = std::log(std::max(bytes, 1.0)) - goal;
    ++best.pilots;
    if (std::abs(y) < best_miss) {
      best_miss = std::abs(y);
      best.lambda_bar = pilot.mean_threshold;
      best.bytes_per_round = bytes;
    }
    if (std::abs(y) <= std::log1p(options.tolerance)) break;
    if (k > 0 && x != prev_x) {
      slope = std::clamp(-(y - prev_y) / (x - prev_x), kMinSlope, kMaxSlope);
    }
    prev_x = x;
    prev_y = y;
    // Too much traffic (y > 0) needs a larger threshold.
    x += std::clamp(y / slope, -kMaxLogStep, kMaxLogStep);
  }
  best.reference_bytes_per_round = reference_bytes_per_round;
  return best;
}

}  // namespace tern::bench::dagc
