#pragma once
// Seeded partitioning of a dataset across workers: IID, label skew (Dirichlet(alpha) class
// proportions per worker) and volume skew (geometric shares with largest/smallest = ratio, as in
// docs/dagc.md, method). Both skews can be combined. Every worker computes the same partition from
// the same seed and keeps only its own part.
#include <cstdint>
#include <span>
#include <vector>

namespace tern::ml {

struct PartitionSpec {
  double dirichlet_alpha = 0.0;  // 0 = no label skew (IID labels)
  double volume_ratio = 1.0;     // SR = largest share / smallest share; 1 = equal volumes
  uint64_t seed = 1;
};

// With label skew every worker draws a class mix and asks for rows of each class: tables of
// parts x classes entries (16 bytes each). The classes are the largest label + 1, so one stray
// label (65535) among a few rows would take hundreds of megabytes; at most this many entries
// (64 MiB; e.g. 1024 workers x 4096 classes) are allowed.
inline constexpr uint64_t kMaxLabelSkewTable = uint64_t{1} << 22;

// What every worker of a run must share to cut disjoint shards from one partition: FNV-1a over
// the whole data set's labels and class count, the number of shards and the partition spec (not
// the shard index). Never 0.
uint64_t partitionFingerprint(std::span<const int32_t> labels, int32_t classes, size_t parts,
                              const PartitionSpec& spec);

// Shares p_i (sum 1), geometric with p_0/p_{n-1} = ratio, descending.
std::vector<double> geometricShares(size_t parts, double ratio);

// Row indices for each of `parts` workers. Every row is used at most once, every worker gets at
// least one row, and the sizes follow geometricShares(parts, volume_ratio) up to rounding.
// In fact every row is used: sizes are rounded to sum to labels.size(). With label skew each
// worker asks for its size split by its Dirichlet draw; a class asked for more than it holds is
// shared in proportion to the requests, and workers top up from their next-preferred classes.
// Each worker's rows are returned in ascending order. Throws std::invalid_argument when there
// are fewer rows than parts, alpha < 0, ratio < 1, or (with label skew) a label is out of range
// or parts x num_classes exceeds kMaxLabelSkewTable.
std::vector<std::vector<size_t>> partition(std::span<const int32_t> labels, int32_t num_classes,
                                           size_t parts, const PartitionSpec& spec);

}  // namespace tern::ml
