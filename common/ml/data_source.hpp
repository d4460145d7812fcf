#pragma once
// Where a dataset comes from, as named in configuration, and the loader that turns it into a
// Dataset (train or test) plus the shard a worker keeps. Every worker derives the same partition
// from the same seed and keeps only its own rows.
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "common/ml/partition.hpp"

namespace tern::ml {

struct DataSource {
  std::string format = "idx";  // idx | libsvm | csv | synthetic | synthetic_sparse
  std::string images;          // idx: images file
  std::string labels;          // idx: labels file
  std::string path;            // libsvm / csv
  std::string label_column;    // csv
  size_t features = 0;         // libsvm: 0 = infer; synthetic: feature count
  size_t rows = 0;             // synthetic: rows
  int32_t classes = 10;        // synthetic: classes
  size_t nnz_per_row = 74;     // synthetic_sparse: non-zeros per row
  uint64_t seed = 1;           // synthetic: generator seed (the problem and its rows)
  // synthetic: the last fraction of the generated rows is the held-out test set. Training data
  // (Split::kTrain) gets the rows before it, the coordinator's test data (Split::kTest) the rows
  // in it, so both sides name the same rows and seed and never share a row.
  double test_fraction = 0.2;
  enum class Split { kAll, kTrain, kTest };
  Split split = Split::kAll;
  // Where each file was named ("file:line:column" of the configuration key), prefixed to the
  // error when that file is missing or malformed; empty when not from a configuration file.
  std::string images_at, labels_at, path_at;
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

// Throws std::runtime_error naming the file on a missing or malformed file. IDX pixels stay
// bytes (readIdxRows), converted to floats a minibatch at a time.
Dataset loadDataset(const DataSource& source);

// Throws std::runtime_error unless `data`, loaded from `source`, can train or test a model of
// `spec`: at least one row, the model's feature count, labels the model has an output for. The
// error names the role, the file and its configuration line ("c.yaml:30:11: test_data 't.svm':
// 3 features, model has 2"), so a program refuses at start-up what would otherwise stop it at
// the first evaluation.
void requireFitsModel(const std::string& role, const DataSource& source, const Dataset& data,
                      const ModelSpec& spec);

// The rows of worker `index` out of `total` under the partition spec.
Dataset loadShard(const Dataset& full, size_t index, size_t total, const PartitionSpec& spec);
// loadShard(loadDataset(source), ...), the same rows in the same order; an IDX file is streamed
// so that only the shard's rows are ever held (a worker on a small device never holds the rest).
// A partition that cannot be made (fewer rows than shards) is an error naming the source's file.
// With `fingerprint`, also partitionFingerprint() of the whole data set's labels.
Dataset loadShardOf(const DataSource& source, size_t index, size_t total, const PartitionSpec& spec,
                    uint64_t* fingerprint = nullptr);
// partition(full.labels, full.num_classes, total, spec) of the data loaded from source, with
// std::runtime_error naming the source's file (and configuration position) on failure.
std::vector<std::vector<size_t>> partitionOf(const DataSource& source, const Dataset& full,
                                             size_t total, const PartitionSpec& spec);

}  // namespace tern::ml
