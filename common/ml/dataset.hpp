#pragma once
// Datasets for tern: dense (CSV, synthetic), byte (IDX images) or sparse (LIBSVM) row-major
// feature matrices with integer labels, plus the readers and the seeded synthetic generators.
// Byte features stay bytes, zeros left out (byte_rows.hpp), until rows are gathered for a model.
// All readers throw std::runtime_error with the file name (and line for text formats) on bad input.
#include <Eigen/Dense>
#include <Eigen/Sparse>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/ml/byte_rows.hpp"

namespace tern::ml {

using DenseMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using SparseMatrix = Eigen::SparseMatrix<float, Eigen::RowMajor, int32_t>;

// The most rows an IDX file may declare: twice mnist8m's 8.1 million, the largest of the MNIST
// family. A few kilobytes of gzip can declare millions of 1x1 images, and a reader keeps about
// 50 bytes a row (labels, partition, rows picked, where each row's pixels are) whatever the image
// size: at most ~850 MB.
inline constexpr size_t kMaxIdxRows = size_t{1} << 24;

struct Dataset {
  bool is_sparse = false;
  bool is_bytes = false;        // dense features held as bytes (never together with is_sparse)
  DenseMatrix dense;            // rows x features when neither is_sparse nor is_bytes
  SparseMatrix sparse;          // rows x features when is_sparse
  ByteRows bytes;               // rows x features when is_bytes
  float byte_scale = 1.0f;      // is_bytes: feature (i, j) is float(bytes.at(i, j)) * byte_scale
  std::vector<int32_t> labels;  // class index in [0, num_classes); binary tasks use 0/1
  int32_t num_classes = 0;

  size_t rows() const { return labels.size(); }
  size_t features() const;
  // A new dataset holding the given rows, in the given order, stored as this one is.
  Dataset subset(std::span<const size_t> rows) const;
  // The given rows, in the given order, as a model reads them (floats: byte features are
  // scaled here) into `out`, reusing its storage: a worker gathering a minibatch every round
  // allocates its matrix once (out must not be *this).
  void gatherInto(std::span<const size_t> rows, Dataset& out) const;
};

// `data` with byte features turned into floats in `dense`, as gatherInto makes them (any other
// data as it is): for code that reads or edits the feature values themselves.
Dataset withFloatFeatures(Dataset data);

// Chooses rows from every label of a file (and the file's class count), e.g. one shard.
using RowPicker =
    std::function<std::vector<size_t>(std::span<const int32_t> labels, int32_t num_classes)>;
// The picker of every row, in file order.
std::vector<size_t> everyRow(std::span<const int32_t> labels, int32_t num_classes);
// IDX (MNIST / Fashion-MNIST), gzip or plain: the rows `pick` chooses, in its order, with the
// pixels kept as bytes (is_bytes, zeros left out; byte_scale 1/255: features in [0, 1]). The images
// stream through once and only the picked rows are ever in memory. num_classes is the largest label
// + 1 of the whole file. Only unsigned-byte IDX data (3-D images, 1-D labels) is accepted, with at
// least one and at most kMaxIdxRows rows.
Dataset readIdxRows(const std::string& images_path, const std::string& labels_path,
                    const RowPicker& pick);
// withFloatFeatures(readIdxRows(images_path, labels_path, everyRow)): every row, as floats.
Dataset readIdx(const std::string& images_path, const std::string& labels_path);
// LIBSVM text: "label idx:val idx:val ..." with 1-based indices. Labels in {-1,+1} or {0,1}
// map to {0,1}; other integer labels are kept as class indices. features = 0 means infer.
// Indices above kMaxFeatures (model.hpp), and files in which no row has a feature, are refused.
Dataset readLibsvm(const std::string& path, size_t features = 0);
// CSV with a header line; the label column is named by label_column (default: last column).
// Labels follow the LIBSVM rule above; every other column must be numeric.
Dataset readCsv(const std::string& path, const std::string& label_column = "");

// The largest data sets the generators make, so that a configuration cannot ask for more memory
// than a device has: dense data holds (rows + classes) x features floats (the rows and the class
// means), sparse data rows x nnz_per_row values; at most 2^28 either way (1 GiB of floats).
// Sparse data also keeps ~70 bytes of popularity tables a feature, hence at most 2^24 features.
inline constexpr uint64_t kMaxSyntheticValues = uint64_t{1} << 28;
inline constexpr size_t kMaxSyntheticSparseFeatures = size_t{1} << 24;

// Dense Gaussian-mixture classification data: one mean per class (entries N(0,1)), unit noise,
// balanced classes in random order. Throws std::invalid_argument, naming the sizes, for zero
// features or classes, more features than a model takes (kMaxFeatures) or more values than
// kMaxSyntheticValues.
Dataset syntheticDense(size_t rows, size_t features, int32_t classes, uint64_t seed);
// Sparse binary classification data with power-law feature popularity and unit-norm rows,
// labels from a hidden sparse linear model (RCV1-like statistics when called with d=47236,
// n=20242, nnz_per_row=74). Each row has nnz_per_row distinct features drawn by Zipf(1)
// popularity with tf-idf-like values; the hidden model weighs 10% of the features (drawn by
// popularity), its bias balances the classes, and 2% of the labels are flipped. Throws
// std::invalid_argument, naming the sizes, unless 1 <= nnz_per_row <= features <=
// kMaxSyntheticSparseFeatures and rows x nnz_per_row <= kMaxSyntheticValues.
Dataset syntheticSparse(size_t rows, size_t features, size_t nnz_per_row, uint64_t seed);

// Map a multi-class dataset to a binary one: label 1 iff label is in positive_classes.
Dataset toBinary(const Dataset& data, std::span<const int32_t> positive_classes);

}  // namespace tern::ml
