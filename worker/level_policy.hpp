#pragma once
// How many coordinates this push carries: the configured tuner (CAT, the paper's CAT, fixed,
// dynamic, full) under the coordinator's cap, with the cost model chosen in config (payload,
// packet with configured constants, or the live fit of this worker's own link).
#include <memory>
#include <optional>
#include <span>

#include "common/compression/compressor.hpp"
#include "common/config/settings.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/costmodel/link_estimator.hpp"
#include "common/tuning/tuner.hpp"

namespace tern::worker {

class LevelPolicy {
 public:
  LevelPolicy(const config::TuningSettings& settings, uint32_t packet_bytes, double smoothness);
  // overhead_bytes: what the push carries besides the codec's bytes (envelope, framing), priced
  // with them by every cost model. step: the step the coordinator applies to the push (its
  // learning rate; tuning::kBestStep = not known, the paper's step). fresh: the gradient alone
  // when v carries the error-feedback residual (empty = v is the gradient), which cat prices.
  // compute_seconds: what this push's gradient took; cat under the measured cost model prices
  // a push as the seconds of the worker's round, compute + a + b * packets (docs/cat.md).
  tuning::TuningDecision choose(std::span<const float> v, uint32_t cap,
                                const compression::Compressor& compressor,
                                const costmodel::LinkFit& link, size_t overhead_bytes = 0,
                                double step = tuning::kBestStep, std::span<const float> fresh = {},
                                double compute_seconds = 0.0);
  // The fit to price a push with: `link` when it is usable, else the last usable one (nullopt
  // before any).
  std::optional<costmodel::LinkFit> usableFit(const costmodel::LinkFit& link);
  // Takes over the last usable fit of the policy this one replaces (a re-join).
  void keepFitOf(const LevelPolicy& previous) { last_fit_ = previous.last_fit_; }

 private:
  std::unique_ptr<costmodel::CostModel> costModel(const costmodel::LinkFit& link,
                                                  size_t overhead_bytes, double compute_seconds);
  config::TuningSettings settings_;
  // The last usable fit: the estimator withdraws its fit while its recent sizes are too alike to
  // separate a and b (after a detected link change too, until it has probed the new link), and
  // the last fit is a better price than the configured constants meanwhile.
  std::optional<costmodel::LinkFit> last_fit_;
  uint32_t packet_bytes_;
  std::unique_ptr<tuning::Tuner> tuner_;
};

}  // namespace tern::worker
