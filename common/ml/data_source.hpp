#pragma once
// Where a dataset comes from, as named in configuration, and the loader that turns it into a
// Dataset (train or test) plus the shard a worker keeps. Every worker derives the same partition
// from the same seed and keeps only its own rows.
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/partition.hpp"

namespace tern::ml {

struct DataSource {
  std::string format = "idx";  // idx | libsvm | csv | synthetic
  std::string images;          // idx: images file
  std::string labels;          // idx: labels file
  std::string path;            // libsvm / csv
  std::string label_column;    // csv
  size_t features = 0;         // libsvm: 0 = infer; synthetic: feature count
  size_t rows = 0;             // synthetic: rows
  int32_t classes = 10;        // synthetic: classes
  uint64_t seed = 1;           // synthetic: generator seed
  double test_fraction = 0.2;  // synthetic: rows kept aside as test set
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

// Throws std::runtime_error naming the file on a missing or malformed file.
Dataset loadDataset(const DataSource& source);

// The rows of worker `index` out of `total` under the partition spec.
Dataset loadShard(const Dataset& full, size_t index, size_t total, const PartitionSpec& spec);

}  // namespace tern::ml
