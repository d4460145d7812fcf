#include "worker/level_policy.hpp"

namespace tern::worker {

LevelPolicy::LevelPolicy(const config::TuningSettings& settings, uint32_t packet_bytes,
                         double smoothness)
    : settings_(settings), packet_bytes_(packet_bytes) {
  tuning::TunerSpec spec;
  spec.name = settings.method;
  spec.fixed_level = settings.fixed_level;
  spec.recompute_every = settings.recompute_every;
  spec.smoothness = smoothness;
  tuner_ = tuning::makeTuner(spec);
}

std::unique_ptr<costmodel::CostModel> LevelPolicy::costModel(const costmodel::LinkFit& link) const {
  if (settings_.cost_model == "payload") return std::make_unique<costmodel::PayloadCostModel>();
  if (settings_.cost_model == "measured" && link.valid) {
    return std::make_unique<costmodel::PacketCostModel>(link.a, link.b, link.packet_bytes);
  }
  // Packet model with configured constants; also "measured" until the first valid fit.
  return std::make_unique<costmodel::PacketCostModel>(settings_.c_fixed, settings_.c_packet,
                                                      packet_bytes_);
}

tuning::TuningDecision LevelPolicy::choose(std::span<const float> v, uint32_t cap,
                                           const compression::Compressor& compressor,
                                           const costmodel::LinkFit& link) {
  auto cost = costModel(link);
  return tuner_->choose(v, cap, compressor, *cost);
}

}  // namespace tern::worker
