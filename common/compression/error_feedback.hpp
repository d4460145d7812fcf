#pragma once
// Error feedback as a decorator over any compressor (GRACE's "memory"):
//   v = e + g;  c = C(v);  e <- v - c.
// Biased compressors (top-k, threshold, S+Q) then converge. The residual is reset on re-join.
#include <memory>
#include <optional>
#include <vector>

#include "common/compression/compressor.hpp"

namespace tern::compression {

class ErrorFeedback {
 public:
  // shared_corrected: where v is built, shared by feedbacks that never compress at the same
  // time (the simulator's workers); null = a buffer of its own, which becomes the residual after
  // each compression (no copy).
  ErrorFeedback(std::unique_ptr<Compressor> inner, bool enabled,
                std::shared_ptr<std::vector<float>> shared_corrected = nullptr);
  // v = e + g is what the tuner should look at before choosing the level. With feedback off, v
  // is g itself: g must then stay valid until compressCorrected.
  std::span<const float> corrected(std::span<const float> g);
  // corrected(g) when every value of g is finite (checked in the same pass over the model);
  // nullopt otherwise, the residual unchanged and no compressCorrected allowed.
  std::optional<std::span<const float>> correctedIfFinite(std::span<const float> g);
  // Compress the last corrected vector at `level` and update the residual.
  Compressed compressCorrected(uint32_t level, Rng& rng);
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng);
  // A message that was sent but never applied (refused): what it carried goes back into the
  // residual, to be sent later. False, changing nothing, when feedback is off or the dimension
  // differs.
  bool takeBack(const SparseGradient& unsent);
  // The residual itself as the next corrected vector (no new gradient added): for a push asked
  // again after its content was taken back, the residual already holds that gradient. An empty
  // span, changing nothing, when feedback is off or the dimension differs.
  std::span<const float> resendResidual(size_t d);
  void reset();
  const std::vector<float>& residual() const { return residual_; }
  Compressor& inner() { return *inner_; }
  bool enabled() const { return enabled_; }

 private:
  std::unique_ptr<Compressor> inner_;
  bool enabled_;
  std::vector<float> residual_;
  bool shared_;  // corrected_ is shared: copied into the residual, not swapped
  // v with feedback on (its own: after compressing, the old residual's buffer); never null.
  std::shared_ptr<std::vector<float>> corrected_;
  std::span<const float> view_;  // v: corrected_, or the caller's g with feedback off
  bool have_corrected_ = false;  // corrected() called since the last compressCorrected()
};

}  // namespace tern::compression
