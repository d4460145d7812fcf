#pragma once
// The concrete members of the compressor family behind makeCompressor (compressor.hpp). Each
// turns a gradient into a wire message (wire_format.hpp) and the exact vector the receiver will
// decode from it. Sparsifiers: top-k and S+Q (docs/cat.md, method), random-k, hard threshold
// (docs/dagc.md, method: DAGC-A), stochastic sparsification (Wangni et al.; docs/cat.md, method).
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
  CompressorKind kind() const override { return CompressorKind::kIdentity; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return false; }
};

// Top-k: the k largest |g_j|, ties to the lower index; values sent as fp32.
class TopKCompressor final : public Compressor {
 public:
  std::string name() const override { return "topk"; }
  CompressorKind kind() const override { return CompressorKind::kTopK; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return true; }

 private:
  TopKSelector selector_;
};

// fp16 cast: every coordinate rounded to binary16 (nearest, ties to even); magnitudes above
// 65504 saturate to 65504 so the message stays finite.
class Fp16Compressor final : public Compressor {
 public:
  std::string name() const override { return "fp16"; }
  CompressorKind kind() const override { return CompressorKind::kFp16; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return false; }
};

// Random-k: k coordinates drawn uniformly without replacement from the caller's Rng, sent as
// g_j * d / k so that E[C(g)] = g.
class RandomKCompressor final : public Compressor {
 public:
  std::string name() const override { return "randomk"; }
  CompressorKind kind() const override { return CompressorKind::kRandomK; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return true; }

 private:
  std::vector<uint64_t> chosen_;  // membership bitmap, reused between calls
};

// Hard threshold (DAGC-A): every coordinate with |g_j| >= lambda, as fp32. The count depends on
// the data, so encodedBytes takes `level` as the expected count (e.g. the last round's), and
// compress takes it as a limit: when more than `level` pass, the largest `level` go (0 = all).
class ThresholdCompressor final : public Compressor {
 public:
  explicit ThresholdCompressor(double lambda);
  std::string name() const override { return "threshold"; }
  CompressorKind kind() const override { return CompressorKind::kThreshold; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return false; }
  bool levelLimitsCount() const override { return true; }
  // How many coordinates passed the threshold in the last compress (more than it sent when the
  // limit cut the push).
  size_t lastPassed() const { return last_passed_; }

 private:
  uint32_t key_;  // magnitudeKey of the smallest float >= lambda
  size_t last_passed_ = 0;
  TopKSelector selector_;
};

// S+Q (CAT): the top-T indices, their signs and one scale s = mean |g_j| over them; the receiver
// reads s * sign(g_j). Zero entries carry no sign, so they are dropped: fewer than T are sent
// when g has fewer than T non-zeros.
class SqCompressor final : public Compressor {
 public:
  std::string name() const override { return "sq"; }
  CompressorKind kind() const override { return CompressorKind::kSq; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return true; }

 private:
  TopKSelector selector_;
};

// Stochastic sparsification (Wangni et al. 2018, CAT eq. 15): keep j with probability
// p_j = min(1, lambda |g_j|), lambda set so that sum_j p_j = T, and send g_j / p_j, which makes
// E[C(g)] = g. The count sent is random with mean T; encodedBytes reports the size at count T.
class StochasticCompressor final : public Compressor {
 public:
  std::string name() const override { return "stochastic"; }
  CompressorKind kind() const override { return CompressorKind::kStochastic; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return true; }
  // lambda for g and T (exposed for tests); infinity when T >= the number of non-zeros.
  double solveLambda(std::span<const float> g, uint32_t expected);

 private:
  TopKSelector selector_;
  std::vector<uint32_t> top_;
  std::vector<float> top_values_;
};

// QSGD (Alistarh et al. 2017) with s levels: each coordinate becomes
// ||g||_2 * sign(g_j) * l_j / s with l_j the stochastic rounding of s |g_j| / ||g||_2, so
// E[C(g)] = g; levels are packed at ceil(log2(2s + 1)) bits per coordinate.
class QsgdCompressor final : public Compressor {
 public:
  explicit QsgdCompressor(uint32_t levels);
  std::string name() const override { return "qsgd"; }
  CompressorKind kind() const override { return CompressorKind::kQsgd; }
  Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) override;
  size_t encodedBytes(uint32_t dim, uint32_t level) const override;
  bool hasLevel() const override { return false; }

 private:
  uint32_t levels_;
};

}  // namespace tern::compression
