#pragma once
// The cat tuner's S+Q level search between full recomputes, from magnitude bins without a sort
// (docs/cat.md, method): the level follows the vector from push to push.
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/tuning/improvement.hpp"
#include "common/tuning/tuner.hpp"

namespace tern::tuning {

// The hybrid's step between S+Q's full recomputes (S+Q's T* moves from push to push where
// top-T's stays put). One pass over the vector bins the magnitudes by their float exponent and
// top three mantissa bits (1/8 octave, no logarithm), keeping count, S1 and the largest
// magnitude per bin, and ||v||_2^2 for the drift check. A scan from the largest bin down
// evaluates S1^2 / (2 L T) / C(T) at every bin boundary (the levels a threshold there would
// keep). Levels inside a bin that can matter, the last level of each packet count (the level
// that fills the packets it pays for) and the cap when it cuts a bin, get an upper bound from
// the bin's largest magnitude; those whose bound beats the best ratio found are evaluated
// exactly, best bound first and at most kMaxExact of them, by a selection among that bin's
// magnitudes only. No sort; the improvement is exact for what the level keeps, only the choice
// among levels is coarser than the full search's.
class BinnedSearch {
 public:
  struct Scan {
    bool any = false;       // some magnitude is finite and nonzero
    uint32_t top = 0;       // bin of the largest
    double sparsity = 0.0;  // ||v||_1^2 / ||v||_2^2, as effectiveSparsity computes it
  };

  // The one pass over v; choose() then works from the bins it kept.
  Scan scan(std::span<const float> v);

  // `s` is the last scan() this object made, with s.any set. eta: kBestStep, or a step below
  // 2/L (where the improvement is a positive multiple of S1^2 / T).
  TuningDecision choose(std::span<const float> v, const Scan& s, uint32_t cap, double L, double eta,
                        const compression::Compressor& comp, const costmodel::CostModel& cost);

 private:
  // How choose() prices a level T whose T largest magnitudes sum to s1.
  struct Pricing {
    uint32_t dim;
    double L;
    double eta;
    const compression::Compressor& comp;
    const costmodel::CostModel& cost;

    double costAt(uint32_t T) const { return cost.cost(comp.encodedBytes(dim, T)); }
    double improvement(double s1, uint32_t T) const {
      if (eta != kBestStep) return biasedImprovement(s1 * s1 / static_cast<double>(T), L, eta);
      return s1 * s1 / (2.0 * L * static_cast<double>(T));
    }
  };
  // The best level seen by improvement per cost, ties to the smaller level: its S1, cost and ratio.
  struct Best {
    uint32_t level = 0;
    double sum = 0.0;
    double price = 0.0;
    double ratio = -1.0;

    void consider(const Pricing& pricing, uint32_t T, double s1) {
      const double c = pricing.costAt(T);
      const double r = c > 0.0 ? pricing.improvement(s1, T) / c : 0.0;
      if (r > ratio || (r == ratio && T < level)) {
        ratio = r;
        level = T;
        sum = s1;
        price = c;
      }
    }
  };

  // Weighs every bin boundary below the cap and gathers into inside_ the levels inside a bin
  // that can matter (packet fills, the cap), each with its bound.
  void sweepBins(const Pricing& pricing, const std::vector<uint32_t>& fills, uint32_t cap,
                 Best& best);

  // Evaluates exactly the levels of inside_ whose bound beats the best ratio, best bound first
  // and at most kMaxExact of them.
  void refineInside(std::span<const float> v, const Scan& s, const Pricing& pricing, Best& best);

  // The finite nonzero magnitudes of v in search bin `bin`, into scratch_.
  void gatherBin(std::span<const float> v, uint32_t top, uint32_t bin);

  static constexpr uint32_t kBins = 256;  // 32 octaves at 8 bins each
  static constexpr double kMinLevelsPerPacket = 64.0;
  static constexpr int kMaxExact = 4;            // selections inside bins per choice, at most
  static constexpr uint32_t kMantissaDrop = 20;  // keep 3 of 23 mantissa bits
  static constexpr uint32_t kInfinityBits = 0x7f800000u;  // the bits of +infinity
  static constexpr uint32_t kAbsoluteBins = (kInfinityBits >> kMantissaDrop) + 1;
  static constexpr size_t kLanes = 2;
  struct Lane {
    std::array<uint32_t, kAbsoluteBins> count;
    std::array<double, kAbsoluteBins> s1;
    std::array<float, kAbsoluteBins> largest;
  };
  struct Inside {
    uint32_t level, bin, before;  // the level, its bin, the level at the bin's upper boundary
    double s1_before;             // S1 of the bins above
    double bound;                 // upper bound on the ratio at `level`
  };
  // The last level of each packet count below `cap` (levels that fill the packets they pay
  // for), kept from call to call while the compressor, dimension, cap and packet size stay.
  // Empty without packets, or when a packet holds so few levels that the cost is close to
  // affine and bin boundaries suffice.
  const std::vector<uint32_t>& packetFills(uint32_t dim, uint32_t cap,
                                           const compression::Compressor& comp,
                                           const costmodel::CostModel& cost);

  static uint32_t bitsOf(float a) {
    uint32_t bits;
    std::memcpy(&bits, &a, sizeof bits);
    return bits;
  }
  // Exponent and the top three mantissa bits of a positive float: monotone in the value.
  static uint32_t binOf(float a) { return bitsOf(a) >> kMantissaDrop; }
  // Bin 0 holds the largest magnitudes; everything kBins - 1 bins below shares the last.
  static uint32_t binIndex(uint32_t top, float a) {
    return std::min<uint32_t>(top - binOf(a), kBins - 1);
  }
  std::array<Lane, kLanes> lanes_{};  // scan()'s bins, by absolute bin; zero between scans
  std::vector<uint32_t> count_;
  std::vector<double> s1_;
  std::vector<float> largest_;
  std::vector<Inside> inside_;
  std::vector<float> scratch_;  // the magnitudes of one bin
  std::vector<uint32_t> fills_;
  size_t fills_packet_ = 0;
  size_t fills_overhead_ = 0;
  uint32_t fills_dim_ = 0, fills_cap_ = 0;
  std::optional<compression::CompressorKind> fills_compressor_;
};

}  // namespace tern::tuning
