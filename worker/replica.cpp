#include "worker/replica.hpp"

#include <atomic>

#include "common/compression/codec.hpp"
#include "common/compression/compressor_support.hpp"
#include "common/util/checksum.hpp"

namespace tern::worker {

std::optional<std::pair<uint64_t, uint64_t>> Replica::announce() {
  const uint64_t sum = params_->empty() ? 0 : checksum(*params_);
  announced_checksum_ = sum == 0 ? std::nullopt : std::optional<uint64_t>(sum);
  if (!announced_checksum_) return std::nullopt;
  return std::pair{round_, *announced_checksum_};
}

std::optional<std::vector<float>> Replica::fromWelcome(const wire::Welcome& w,
                                                       std::span<const uint8_t> payload,
                                                       size_t num_params,
                                                       std::string& error) const {
  // The replica this worker's join named, as it stands (or with the round's update): the
  // coordinator matched its checksum, and the replica has not changed since the join.
  const bool update = w.model_payload() == wire::Welcome::REPLICA_UPDATE;
  const uint64_t round = round_ + (update ? 1 : 0);
  if (!announced_checksum_ || params_->size() != num_params ||
      checksum(*params_) != *announced_checksum_) {
    error = "it holds no such replica";
  } else if (w.model_payload() != wire::Welcome::REPLICA_CURRENT && !update) {
    error = "unknown model payload " + std::to_string(int(w.model_payload()));
  } else if (!update && !payload.empty()) {
    error = "it carries " + std::to_string(payload.size()) + " bytes all the same";
  } else if (w.round() != round) {
    error = "its replica is at round " + std::to_string(round_) + ", the welcome's model at " +
            std::to_string(w.round());
  } else {
    std::vector<float> params = *params_;
    if (!update || applyUpdateTo(payload, params, error)) return params;
    error = "bad update: " + error;
  }
  return std::nullopt;
}

void Replica::reset(std::vector<float> params, uint64_t round) {
  params_ = std::make_shared<std::vector<float>>(std::move(params));
  round_ = round;
}

std::vector<float>& Replica::writable() {
  if (params_.use_count() == 1) {
    // The last trainer let go of them (on its own thread, maybe): what it read came before.
    std::atomic_thread_fence(std::memory_order_acquire);
  } else {
    params_ = std::make_shared<std::vector<float>>(*params_);
  }
  return *params_;
}

bool Replica::applyUpdateTo(std::span<const uint8_t> payload, std::vector<float>& params,
                            std::string& error) const {
  compression::DecodeLimits limits;
  limits.expected_dim = uint32_t(params.size());
  limits.max_dim = uint32_t(params.size());
  limits.max_bytes = max_message_bytes_;
  // A dense update (every coordinate) is added from its frame: no copy of the model's size.
  if (const auto dense = compression::denseFp32View(payload, limits)) {
    if (compression::addDenseIfFinite(*dense, 1.0f, params)) return true;
    error = "a non-finite value, or applying it would make the replica non-finite";
    return false;
  }
  auto update = compression::decode(payload, limits, update_scratch_);
  if (!update.value) {
    error = update.error;
    return false;
  }
  // A finite update can still overflow the replica: then nothing of it stays applied.
  const bool stays_finite =
      compression::addScaledIfFinite(*update.value, 1.0f, params, saved_scratch_);
  if (!stays_finite) error = "applying it would make the replica non-finite";
  update_scratch_ = std::move(*update.value);  // its buffers serve the next update
  return stays_finite;
}

Replica::Sync Replica::takeRoundModel(const wire::RoundStart& rs, std::span<const uint8_t> payload,
                                      std::string& error) {
  if (rs.full_model()) {
    if (!takeWholeModel(payload, error)) return Sync::refused;
  } else if (!payload.empty()) {
    // An update that does not apply to the replica held: the whole model is needed again.
    if (round_ + 1 != rs.round()) return Sync::rejoin;
    if (!applyUpdateTo(payload, writable(), error)) {
      error = "bad update: " + error;
      return Sync::refused;
    }
  } else if (round_ != rs.round()) {
    return Sync::rejoin;
  }
  round_ = rs.round();
  return Sync::done;
}

bool Replica::takeWholeModel(std::span<const uint8_t> payload, std::string& error) {
  std::vector<float> model(params_->size());
  if (!bytesToFloats(payload, model)) {
    error = "full model has the wrong size";
    return false;
  }
  if (!compression::detail::allFinite(model)) {
    error = "full model holds a non-finite value";
    return false;
  }
  params_ = std::make_shared<std::vector<float>>(std::move(model));
  return true;
}

bool Replica::takeFinal(uint64_t round, std::span<const uint8_t> payload, bool full_model,
                        std::string& error) {
  if (full_model && !payload.empty()) {
    if (!takeWholeModel(payload, error)) return false;
    round_ = round;
    return true;
  }
  if (payload.empty() || round_ + 1 != round) return true;
  if (!applyUpdateTo(payload, writable(), error)) return false;
  round_ = round;
  return true;
}

}  // namespace tern::worker
