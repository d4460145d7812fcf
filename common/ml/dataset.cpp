#include "common/ml/dataset.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tern::ml {
namespace {

void checkRows(std::span<const size_t> rows, size_t n) {
  for (size_t r : rows) {
    if (r >= n) {
      throw std::out_of_range("Dataset: row " + std::to_string(r) + " out of range (" +
                              std::to_string(n) + " rows)");
    }
  }
}

// The CSR arrays of the chosen rows, built directly: inserting row by row would re-search every
// inner vector.
void gatherSparse(const SparseMatrix& sparse, std::span<const size_t> rows, SparseMatrix& out) {
  const auto* outer = sparse.outerIndexPtr();
  const auto* nnz_of = sparse.innerNonZeroPtr();  // non-null only for uncompressed storage
  std::vector<int32_t> starts(rows.size() + 1, 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(rows[i]);
    const int32_t count = nnz_of ? nnz_of[r] : outer[r + 1] - outer[r];
    starts[i + 1] = starts[i] + count;
  }
  out.resize(static_cast<Eigen::Index>(rows.size()), sparse.cols());
  out.resizeNonZeros(starts.back());
  std::copy(starts.begin(), starts.end(), out.outerIndexPtr());
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(rows[i]);
    const int32_t count = starts[i + 1] - starts[i];
    std::copy_n(sparse.innerIndexPtr() + outer[r], count, out.innerIndexPtr() + starts[i]);
    std::copy_n(sparse.valuePtr() + outer[r], count, out.valuePtr() + starts[i]);
  }
}

}  // namespace

size_t Dataset::features() const {
  if (is_sparse) return size_t(sparse.cols());
  return is_bytes ? bytes.cols() : size_t(dense.cols());
}

Dataset Dataset::subset(std::span<const size_t> rows) const {
  Dataset out;
  if (!is_bytes) {
    gatherInto(rows, out);
    return out;
  }
  checkRows(rows, this->rows());
  out.is_bytes = true;
  out.byte_scale = byte_scale;
  out.num_classes = num_classes;
  out.labels.reserve(rows.size());
  for (size_t r : rows) out.labels.push_back(labels[r]);
  out.bytes = ByteRows(bytes.cols());
  out.bytes.reserve(rows.size());
  for (size_t r : rows) out.bytes.appendRowOf(bytes, r);
  return out;
}

void Dataset::gatherInto(std::span<const size_t> rows, Dataset& out) const {
  if (&out == this) throw std::invalid_argument("Dataset::gatherInto: out is the source");
  checkRows(rows, this->rows());
  out.is_sparse = is_sparse;
  out.is_bytes = false;
  out.byte_scale = 1.0f;
  out.num_classes = num_classes;
  out.labels.clear();
  out.labels.reserve(rows.size());
  for (size_t r : rows) out.labels.push_back(labels[r]);
  // Only one of the matrices is in use.
  if (out.bytes.rows() != 0) out.bytes = ByteRows();
  if (is_sparse && out.dense.size() != 0) out.dense.resize(0, 0);
  if (!is_sparse && out.sparse.nonZeros() != 0) out.sparse.resize(0, 0);
  if (is_sparse) return gatherSparse(sparse, rows, out.sparse);
  out.dense.resize(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(features()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto to = static_cast<Eigen::Index>(i);
    if (is_bytes) {
      bytes.toFloats(rows[i], byte_scale, out.dense.row(to).data());
    } else {
      out.dense.row(to) = dense.row(static_cast<Eigen::Index>(rows[i]));
    }
  }
}

Dataset withFloatFeatures(Dataset data) {
  if (!data.is_bytes) return data;
  data.dense.resize(Eigen::Index(data.bytes.rows()), Eigen::Index(data.bytes.cols()));
  for (size_t r = 0; r < data.bytes.rows(); ++r) {
    data.bytes.toFloats(r, data.byte_scale, data.dense.row(Eigen::Index(r)).data());
  }
  data.bytes = ByteRows();
  data.is_bytes = false;
  data.byte_scale = 1.0f;
  return data;
}

Dataset toBinary(const Dataset& data, std::span<const int32_t> positive_classes) {
  Dataset out = data;
  for (auto& y : out.labels) {
    y = std::find(positive_classes.begin(), positive_classes.end(), y) != positive_classes.end()
            ? 1
            : 0;
  }
  out.num_classes = 2;
  return out;
}

}  // namespace tern::ml
