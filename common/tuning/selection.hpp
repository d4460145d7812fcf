#pragma once
// CAT's level selection (docs/cat.md, method):  T* = argmax_{T in [1, m]} improvement(T) / C(T),
// C(T) = cost model applied to Compressor::encodedBytes(d, T), m = min(d, cap); ties go to the
// smaller T (fewer bytes for the same value). selectLevel() is exact and fast: it splits [1, m]
// into blocks (the packets of a packet model, fixed runs otherwise), bounds the ratio in each
// block by improvementUpperBound / C(block start), and scans only blocks whose bound can still
// beat the best ratio found, best bound first (branch and bound). This needs no quasi-concavity,
// which S+Q's S1(T)^2 / T lacks, and no monotone improvement inside a packet, which S+Q lacks
// too. selectLevelBruteForce() evaluates every T; tests compare the two.
// Where no T earns a decrease (the improvement at the receiver's step eta is <= 0 everywhere:
// eta >= 2/L for top-T and S+Q, or the noise of an unbiased compressor outweighing its gain)
// both return the T with the largest improvement, the least harm, ties to the smaller T: a
// ratio of negative improvements would favour the costliest level.
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/tuning/improvement.hpp"
#include "common/tuning/magnitude_profile.hpp"

namespace tern::tuning {

struct Selection {
  uint32_t level = 1;
  double improvement = 0.0;  // credited; negative when no level earns a decrease
  double cost = 0.0;
  double ratio = 0.0;      // improvement / cost
  size_t evaluations = 0;  // ratios computed (a measure of the search's work)
};

// Requires 1 <= max_level <= p.dim() and L > 0 (throws std::invalid_argument otherwise), and a
// cost that is non-decreasing in T below max_level (encodedBytes non-decreasing in the level,
// C non-decreasing in bytes). Sorts more of p only when a block past its prefix could win.
// credit_limit caps the improvement credited to any T: the ratio is
// min(improvement(T), credit_limit) / C(T) (infinity = CAT as in the paper; see
// Tuner::choose's gradient_sq_norm for what tern uses it for). Must be >= 0 (NaN throws).
// base_improvement is a decrease the step earns at every T (see Tuner::choose); the ratio is
// min(base_improvement + improvement(T), credit_limit) / C(T). Must be finite and >= 0.
// eta: the step the receiver applies (kBestStep = each compressor's best step, the paper's CAT);
// finite and >= 0. A cap, a base or a step of the receiver's deviates from the paper's criterion:
// docs/cat.md, "Deviations from the paper", says how.
Selection selectLevel(Scheme scheme, MagnitudeProfile& p, double L, uint32_t max_level,
                      const compression::Compressor& comp, const costmodel::CostModel& cost,
                      double credit_limit = std::numeric_limits<double>::infinity(),
                      double base_improvement = 0.0, double eta = kBestStep);
// The levels T in [1, last) after which the packet count of encodedBytes(dim, T) +
// overhead_bytes steps up: the last level of every packet count but the one `last` is in,
// ascending (the levels that fill the packets they pay for). nullopt when packet_bytes is 0 or
// packets hold fewer than min_levels_per_packet levels on average (the cost is then close to
// affine). Needs encodedBytes non-decreasing in the level up to `last`.
std::optional<std::vector<uint32_t>> packetSteps(const compression::Compressor& comp, uint32_t dim,
                                                 uint32_t last, size_t packet_bytes,
                                                 double min_levels_per_packet,
                                                 size_t overhead_bytes = 0);

// Sorts p up to max_level and evaluates every T.
Selection selectLevelBruteForce(Scheme scheme, MagnitudeProfile& p, double L, uint32_t max_level,
                                const compression::Compressor& comp,
                                const costmodel::CostModel& cost,
                                double credit_limit = std::numeric_limits<double>::infinity(),
                                double base_improvement = 0.0, double eta = kBestStep);

}  // namespace tern::tuning
