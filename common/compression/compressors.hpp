#pragma once
// The concrete members of the compressor family behind makeCompressor (compressor.hpp). Each
// turns a gradient into a wire message (wire_format.hpp) and the exact vector the receiver will
// decode from it. Sparsifiers: top-k and S+Q (papers/cat.md eq. 9 and 12), random-k, hard
// threshold (papers/dagc.md, DAGC-A), stochastic sparsification (Wangni et al., cat.md eq. 15).
// Quantisers: identity (fp32), fp16 and QSGD (Alistarh et al.).
#include <cstdint>
#include <span>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/compression/top_k_selection.hpp"

namespace tern::compression {

class IdentityCompressor final : public Compressor {
 public:
  std::string name() const override { return "identity"; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return false; }
};

// Top-k: the k largest |g_j|, ties to the lower index; values sent as fp32.
class TopKCompressor final : public Compressor {
 public:
  std::string name() const override { return "topk"; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return true; }

 private:
  TopKSelector selector_;
};

}  // namespace tern::compression
