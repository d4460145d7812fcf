#include "common/ml/dataset.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tern::ml {

Dataset Dataset::subset(std::span<const size_t> rows) const {
  Dataset out;
  gatherInto(rows, out);
  return out;
}

void Dataset::gatherInto(std::span<const size_t> rows, Dataset& out) const {
  if (&out == this) throw std::invalid_argument("Dataset::gatherInto: out is the source");
  const size_t n = this->rows();
  for (size_t r : rows) {
    if (r >= n) {
      throw std::out_of_range("Dataset: row " + std::to_string(r) + " out of range (" +
                              std::to_string(n) + " rows)");
    }
  }
  out.is_sparse = is_sparse;
  out.num_classes = num_classes;
  out.labels.clear();
  out.labels.reserve(rows.size());
  for (size_t r : rows) out.labels.push_back(labels[r]);
  // Only one of the two matrices is in use.
  if (is_sparse && out.dense.size() != 0) out.dense.resize(0, 0);
  if (!is_sparse && out.sparse.nonZeros() != 0) out.sparse.resize(0, 0);
  if (is_sparse) {
    // Build the CSR arrays directly: inserting row by row would re-search every inner vector.
    const auto* outer = sparse.outerIndexPtr();
    const auto* nnz_of = sparse.innerNonZeroPtr();  // non-null only for uncompressed storage
    std::vector<int32_t> starts(rows.size() + 1, 0);
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto r = static_cast<Eigen::Index>(rows[i]);
      const int32_t count = nnz_of ? nnz_of[r] : outer[r + 1] - outer[r];
      starts[i + 1] = starts[i] + count;
    }
    out.sparse.resize(static_cast<Eigen::Index>(rows.size()), sparse.cols());
    out.sparse.resizeNonZeros(starts.back());
    std::copy(starts.begin(), starts.end(), out.sparse.outerIndexPtr());
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto r = static_cast<Eigen::Index>(rows[i]);
      const int32_t count = starts[i + 1] - starts[i];
      std::copy_n(sparse.innerIndexPtr() + outer[r], count, out.sparse.innerIndexPtr() + starts[i]);
      std::copy_n(sparse.valuePtr() + outer[r], count, out.sparse.valuePtr() + starts[i]);
    }
  } else {
    out.dense.resize(static_cast<Eigen::Index>(rows.size()), dense.cols());
    for (size_t i = 0; i < rows.size(); ++i) {
      out.dense.row(static_cast<Eigen::Index>(i)) = dense.row(static_cast<Eigen::Index>(rows[i]));
    }
  }
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
