#include "worker/level_policy.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace tern::worker {
namespace {
constexpr double kMinPacketSeconds = 1e-12;
}  // namespace

LevelPolicy::LevelPolicy(const config::TuningSettings& settings, uint32_t packet_bytes,
                         double smoothness)
    : settings_(settings), packet_bytes_(packet_bytes) {
  tuning::TunerSpec spec;
  spec.kind = settings.method;
  spec.fixed_level = settings.fixed_level;
  spec.recompute_every = settings.recompute_every;
  spec.recompute_drift = settings.recompute_drift;
  spec.smoothness = smoothness;
  tuner_ = tuning::makeTuner(spec);
}

std::unique_ptr<costmodel::CostModel> LevelPolicy::costModel(const costmodel::LinkFit& link,
                                                             size_t overhead_bytes,
                                                             double compute_seconds) {
  using costmodel::CostModelKind;
  if (settings_.cost_model == CostModelKind::kPayload)
    return std::make_unique<costmodel::PayloadCostModel>(overhead_bytes);
  if (settings_.cost_model == CostModelKind::kMeasured) {
    if (usableFit(link)) {
      // cat's price is in seconds of the worker's round: the gradient's compute is paid whatever
      // the level, a fixed cost beside the link's own (the paper's CAT prices the link alone).
      const bool with_compute = settings_.method == tuning::TunerKind::kCat &&
                                std::isfinite(compute_seconds) && compute_seconds > 0.0;
      // On a fast link (loopback) the fitted per-packet time can be 0: a packet then costs next
      // to nothing, which the model must still accept.
      return std::make_unique<costmodel::PacketCostModel>(
          std::max(last_fit_->a, 0.0) + (with_compute ? compute_seconds : 0.0),
          std::max(last_fit_->b, kMinPacketSeconds), last_fit_->packet_bytes, overhead_bytes);
    }
  }
  // Packet model with configured constants; also "measured" until the first valid fit.
  return std::make_unique<costmodel::PacketCostModel>(settings_.c_fixed, settings_.c_packet,
                                                      packet_bytes_, overhead_bytes);
}

std::optional<costmodel::LinkFit> LevelPolicy::usableFit(const costmodel::LinkFit& link) {
  if (link.valid && std::isfinite(link.a) && std::isfinite(link.b) && link.packet_bytes > 0)
    last_fit_ = link;
  return last_fit_;
}

tuning::TuningDecision LevelPolicy::choose(std::span<const float> v, uint32_t cap,
                                           const compression::Compressor& compressor,
                                           const costmodel::LinkFit& link, size_t overhead_bytes,
                                           double step, std::span<const float> fresh,
                                           double compute_seconds) {
  try {
    auto cost = costModel(link, overhead_bytes, compute_seconds);
    return tuner_->choose(v, cap, compressor, *cost, -1.0, 0.0, step, fresh);
  } catch (const std::exception& e) {
    // A tuning failure must not stop training: send what the cap allows.
    spdlog::warn("tuner failed ({}); sending at the cap", e.what());
    tuning::TuningDecision d;
    d.level = cap;
    return d;
  }
}

}  // namespace tern::worker
