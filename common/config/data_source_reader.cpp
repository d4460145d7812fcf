#include "common/config/data_source_reader.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"

namespace tern::config {

namespace {

// The keys each data format reads besides 'format' (ml::loadDataset); another would be ignored.
const std::vector<std::string>& keysOfFormat(const std::string& format) {
  static const std::map<std::string, std::vector<std::string>> keys = {
      {"idx", {"images", "labels"}},
      {"libsvm", {"path", "features"}},
      {"csv", {"path", "label_column"}},
      {"synthetic", {"rows", "features", "classes", "seed", "test_fraction"}},
      {"synthetic_sparse", {"rows", "features", "nnz_per_row", "seed", "test_fraction"}}};
  return keys.at(format);
}

// Refuses a key the data source's format would ignore.
void refuseUnreadKeys(MapReader& m, const std::string& format) {
  const std::vector<std::string>& used = keysOfFormat(format);
  for (const std::string key : {"images", "labels", "path", "label_column", "features", "rows",
                                "classes", "nnz_per_row", "seed", "test_fraction"}) {
    if (!m.has(key) || std::find(used.begin(), used.end(), key) != used.end()) continue;
    std::string reads;
    for (const auto& k : used) reads += (reads.empty() ? "'" : ", '") + k + "'";
    m.fail(key, "'" + key + "' is not read by format " + format + " (it reads " + reads + ")");
  }
}

void readDataKeys(MapReader& m, ml::DataSource& d) {
  d.images = m.get<std::string>("images", d.images);
  d.labels = m.get<std::string>("labels", d.labels);
  d.path = m.get<std::string>("path", d.path);
  d.images_at = m.at("images");
  d.labels_at = m.at("labels");
  d.path_at = m.at("path");
  d.label_column = m.get<std::string>("label_column", d.label_column);
  // No model is wider than kMaxFeatures: a wider data set could never be trained on.
  d.features =
      m.inRange<size_t>("features", m.get<size_t>("features", d.features), 0, ml::kMaxFeatures);
  d.rows = m.inRange<size_t>("rows", m.get<size_t>("rows", d.rows), 0, ml::kMaxSyntheticValues);
  d.classes = m.inRange<int32_t>("classes", m.get<int32_t>("classes", d.classes), 2, 1 << 16);
  d.nnz_per_row =
      m.inRange<size_t>("nnz_per_row", m.get<size_t>("nnz_per_row", d.nnz_per_row), 1, 1u << 20);
  d.seed = m.get<uint64_t>("seed", d.seed);
  d.test_fraction =
      m.inRange("test_fraction", m.get<double>("test_fraction", d.test_fraction), 0.0, 0.9);
}

// The generators' budgets (ml::syntheticDense, ml::syntheticSparse), said at the key's line
// rather than by the generator, or by std::bad_alloc.
void checkSyntheticBudgets(MapReader& m, const ml::DataSource& d) {
  const std::string budget = std::to_string(ml::kMaxSyntheticValues) + " values (1 GiB of floats)";
  if (d.format == "synthetic" &&
      (uint64_t(d.rows) + uint64_t(d.classes)) * d.features > ml::kMaxSyntheticValues) {
    m.fail("rows", "synthetic data of " + std::to_string(d.rows) + " 'rows' and " +
                       std::to_string(d.classes) + " class means of " + std::to_string(d.features) +
                       " 'features' is more than " + budget);
  }
  if (d.format == "synthetic_sparse" && d.features > ml::kMaxSyntheticSparseFeatures) {
    m.fail("features", "'features' of synthetic_sparse data must be at most " +
                           std::to_string(ml::kMaxSyntheticSparseFeatures) +
                           " (the generator keeps ~70 bytes a feature)");
  }
  if (d.format == "synthetic_sparse" &&
      uint64_t(d.rows) * d.nnz_per_row > ml::kMaxSyntheticValues) {
    m.fail("rows", "synthetic_sparse data of " + std::to_string(d.rows) + " 'rows' of " +
                       std::to_string(d.nnz_per_row) + " 'nnz_per_row' is more than " + budget);
  }
}

// Synthetic data split into training and test rows: training data may keep every row
// (test_fraction 0); test data needs one at least.
void checkSyntheticSplit(MapReader& m, const ml::DataSource& d, ml::DataSource::Split split) {
  const double test = std::round(double(d.rows) * d.test_fraction);
  const bool is_test = split == ml::DataSource::Split::kTest;
  if ((is_test && test < 1.0) || test >= double(d.rows)) {
    m.fail(m.has("test_fraction") ? "test_fraction" : "rows",
           is_test ? "'test_fraction' of 'rows' must leave at least one test and one "
                     "training row"
                   : "'test_fraction' of 'rows' must leave at least one training row");
  }
}

}  // namespace

void readDataSource(MapReader& m, ml::DataSource& d, ml::DataSource::Split split) {
  d.split = split;
  d.format = m.oneOf("format", m.get<std::string>("format", d.format),
                     {"idx", "libsvm", "csv", "synthetic", "synthetic_sparse"});
  refuseUnreadKeys(m, d.format);
  readDataKeys(m, d);
  if (d.format == "idx" && (d.images.empty() || d.labels.empty())) {
    m.failHere("idx data needs 'images' and 'labels'");
  }
  if ((d.format == "libsvm" || d.format == "csv") && d.path.empty()) {
    m.failHere(d.format + " data needs 'path'");
  }
  const bool synthetic = d.format == "synthetic" || d.format == "synthetic_sparse";
  if (synthetic && (d.rows == 0 || d.features == 0)) {
    m.failHere(d.format + " data needs 'rows' and 'features'");
  }
  if (d.format == "synthetic_sparse" && d.nnz_per_row > d.features) {
    m.fail("nnz_per_row", "'nnz_per_row' must not exceed 'features'");
  }
  checkSyntheticBudgets(m, d);
  if (synthetic && split != ml::DataSource::Split::kAll) checkSyntheticSplit(m, d, split);
}

}  // namespace tern::config
