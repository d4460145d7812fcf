#pragma once
// The defences of aggregation against poisoned pushes (docs/security.md, "Poisoned pushes"):
// each pusher's weight capped at a share of the round's, each push's norm clipped to a multiple
// of the round's median push norm, and the coordinate-wise trimmed mean or median that replaces
// the weighted sum for fleets that do not trust every member. Pure functions, no state.
#include <cstdint>
#include <optional>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/config/settings.hpp"

namespace tern::server {

// The weights of pushers with these sample counts, to be divided by `normaliser`: the counts
// themselves over their sum when no share exceeds `max_share` (the weighted sum's arithmetic
// unchanged), else shares capped at max_share with the excess spread over the others in
// proportion (water-filling); equal shares when n * max_share < 1.
struct PushWeights {
  std::vector<double> weights;
  double normaliser = 1.0;
  bool capped = false;
};
PushWeights cappedWeights(const std::vector<uint64_t>& samples, double max_share);
// The share cap of a round with `pushers`: the configured one, or max(0.5, 2/n) for 0 (auto).
double shareCap(double configured, size_t pushers);

// sqrt(sum of squares) of the push's values, in double.
double pushNorm(const compression::SparseGradient& g);
// The lower median of the non-zero values of `norms` (the ceil(m/2)-th smallest of m); none
// when there is none.
std::optional<double> lowerMedianNonZero(std::vector<double> norms);
// Scales g to norm `bound` when its norm `norm` exceeds it; true when it did.
bool clipTo(compression::SparseGradient& g, double norm, double bound);

// The mean of `values` after cutting floor(trim * m) of the m values from each end.
double trimmedMean(std::vector<float> values, double trim);
// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<float> values);
// Coordinate-wise robust aggregate of `pushes` (dimension dim): at each coordinate the rule's
// statistic over the pushes that sent it, times the fraction of the pushes that sent it (so
// that trimming nothing is the plain mean, a coordinate not sent counting as zero).
std::vector<float> robustAggregate(const std::vector<const compression::SparseGradient*>& pushes,
                                   size_t dim, config::RobustRule rule, double trim);

}  // namespace tern::server
