#pragma once
// The worker's copy of the coordinator's model: its parameters and round, kept bit-identical with
// the coordinator's by applying each broadcast update exactly as it applies them, and the
// replica a join names (which may spare the coordinator sending the whole model again). A
// trainer is lent the parameters themselves (shared, read-only); the replica changes them in
// place unless a trainer still holds them, and then changes a copy.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/compression/compressor.hpp"
#include "proto/message.hpp"

namespace tern::worker {

class Replica {
 public:
  // max_message_bytes: the largest update this worker decodes.
  explicit Replica(uint64_t max_message_bytes) : max_message_bytes_(max_message_bytes) {}

  const std::vector<float>& params() const { return *params_; }
  // The parameters as they stand, for a trainer: they never change while it holds them.
  std::shared_ptr<const std::vector<float>> lend() const { return params_; }
  uint64_t round() const { return round_; }
  // The replica a join names (its round and checksum; nullopt when none is held), remembered.
  std::optional<std::pair<uint64_t, uint64_t>> announce();
  // The parameters a welcome without the whole model starts from (the replica the join named,
  // with the welcome's update if it carries one); nullopt and `error` when that cannot be.
  std::optional<std::vector<float>> fromWelcome(const wire::Welcome& w,
                                                std::span<const uint8_t> payload, size_t num_params,
                                                std::string& error) const;
  void reset(std::vector<float> params, uint64_t round);
  void clear() { params_ = std::make_shared<std::vector<float>>(); }
  // The last join named a replica (announce found one to name).
  bool named() const { return announced_checksum_.has_value(); }

  // The model part of a round start: the full model, or the update taken into the replica.
  enum class Sync { done, rejoin, refused };
  Sync takeRoundModel(const wire::RoundStart& rs, std::span<const uint8_t> payload,
                      std::string& error);
  // The Finish's last update, if it follows the replica's round, or its whole model (full_model);
  // false and `error` if it is bad.
  bool takeFinal(uint64_t round, std::span<const uint8_t> payload, bool full_model,
                 std::string& error);

 private:
  // The whole model from `payload` (its floats, all finite) as the replica.
  bool takeWholeModel(std::span<const uint8_t> payload, std::string& error);
  // Decodes the coordinator's update strictly and adds it to `params`.
  bool applyUpdateTo(std::span<const uint8_t> payload, std::vector<float>& params,
                     std::string& error) const;
  // The parameters to change: the held ones when nothing else holds them, else a copy of them.
  std::vector<float>& writable();

  uint64_t max_message_bytes_;
  mutable compression::SparseGradient update_scratch_;  // each update decoded into it
  mutable std::vector<float> saved_scratch_;  // what an update overwrote, until it is known finite
  std::shared_ptr<std::vector<float>> params_ = std::make_shared<std::vector<float>>();
  uint64_t round_ = 0;
  std::optional<uint64_t> announced_checksum_;  // tern::checksum of the replica the last join named
};

}  // namespace tern::worker
