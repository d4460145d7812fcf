#include "common/ml/data_source.hpp"

#include <cmath>
#include <stdexcept>

#include "common/ml/detail/input_file.hpp"

namespace tern::ml {
namespace {

// The file's configuration position first, when known: "w.yaml:12:11: images file not found: x".
std::string at(const std::string& where, const std::string& message) {
  return where.empty() ? message : where + ": " + message;
}

void requireFile(const std::string& path, const char* what, const std::string& where) {
  if (path.empty())
    throw std::runtime_error(at(where, std::string("no ") + what + " file configured"));
  if (const std::string why = detail::whyNotAFile(path); !why.empty()) {
    throw std::runtime_error(at(where, std::string(what) + " file " + why + ": " + path));
  }
}

// A reader's error (which names the file) with the configuration position in front.
template <typename Read>
Dataset read(const std::string& where, Read read) {
  try {
    return read();
  } catch (const std::exception& e) {
    throw std::runtime_error(at(where, e.what()));
  }
}

bool isFile(const DataSource& source) {
  return source.format == "libsvm" || source.format == "csv";
}

// How an error names a source as a whole: its file, both files of an IDX pair, or the generator.
std::string nameOf(const DataSource& source) {
  if (source.format == "idx")
    return "IDX files '" + source.images + "' and '" + source.labels + "'";
  if (isFile(source)) return "'" + source.path + "'";
  return source.format + " data";
}

// The configuration position errors about the source as a whole are given at.
const std::string& positionOf(const DataSource& source) {
  return source.format == "idx" ? source.images_at : source.path_at;
}

Dataset split(Dataset all, const DataSource& source) {
  if (source.split == DataSource::Split::kAll) return all;
  const size_t n = all.rows();
  const size_t test = size_t(std::llround(double(n) * source.test_fraction));
  if (source.split == DataSource::Split::kTrain && test == 0) return all;
  if (test == 0 || test >= n) {
    throw std::runtime_error("synthetic data: test_fraction " +
                             std::to_string(source.test_fraction) + " of " + std::to_string(n) +
                             " rows leaves no " + (test == 0 ? "test" : "training") + " rows");
  }
  std::vector<size_t> rows;
  const size_t from = source.split == DataSource::Split::kTrain ? 0 : n - test;
  const size_t to = source.split == DataSource::Split::kTrain ? n - test : n;
  for (size_t i = from; i < to; ++i) rows.push_back(i);
  return all.subset(rows);
}

}  // namespace

Dataset loadDataset(const DataSource& source) {
  if (source.format == "idx") {
    requireFile(source.images, "images", source.images_at);
    requireFile(source.labels, "labels", source.labels_at);
    return read(source.images_at,
                [&] { return readIdxRows(source.images, source.labels, everyRow); });
  }
  if (source.format == "libsvm") {
    requireFile(source.path, "libsvm", source.path_at);
    return read(source.path_at, [&] { return readLibsvm(source.path, source.features); });
  }
  if (source.format == "csv") {
    requireFile(source.path, "csv", source.path_at);
    return read(source.path_at, [&] { return readCsv(source.path, source.label_column); });
  }
  if (source.format == "synthetic") {
    return split(syntheticDense(source.rows, source.features, source.classes, source.seed), source);
  }
  if (source.format == "synthetic_sparse") {
    return split(syntheticSparse(source.rows, source.features, source.nnz_per_row, source.seed),
                 source);
  }
  throw std::runtime_error("unknown data format '" + source.format + "'");
}

void requireFitsModel(const std::string& role, const DataSource& source, const Dataset& data,
                      const ModelSpec& spec) {
  // Rows and features are the images file's, labels the labels file's.
  const auto fail = [&](bool labels, const std::string& what) {
    std::string name = "(" + source.format + " data)";
    std::string where;
    if (source.format == "idx") {
      name = "'" + (labels ? source.labels : source.images) + "'";
      where = labels ? source.labels_at : source.images_at;
    } else if (isFile(source)) {
      name = "'" + source.path + "'";
      where = source.path_at;
    }
    throw std::runtime_error(at(where, role + " " + name + ": " + what));
  };
  if (data.rows() == 0) fail(false, "no rows");
  if (data.features() != spec.features) {
    const size_t n = data.features();
    fail(false, std::to_string(n) + (n == 1 ? " feature" : " features") + ", model has " +
                    std::to_string(spec.features));
  }
  if (const std::string why = labelsUnfit(spec, data); !why.empty()) fail(true, why);
}

namespace {

void checkShard(size_t index, size_t total) {
  if (total == 0 || index >= total) {
    throw std::runtime_error("shard index " + std::to_string(index) + " out of range for " +
                             std::to_string(total) + " shards");
  }
}

}  // namespace

Dataset loadShard(const Dataset& full, size_t index, size_t total, const PartitionSpec& spec) {
  checkShard(index, total);
  auto parts = partition(full.labels, full.num_classes, total, spec);
  return full.subset(parts[index]);
}

std::vector<std::vector<size_t>> partitionOf(const DataSource& source, const Dataset& full,
                                             size_t total, const PartitionSpec& spec) {
  try {
    return partition(full.labels, full.num_classes, total, spec);
  } catch (const std::exception& e) {
    throw std::runtime_error(at(positionOf(source), nameOf(source) + ": " + e.what()));
  }
}

Dataset loadShardOf(const DataSource& source, size_t index, size_t total, const PartitionSpec& spec,
                    uint64_t* fingerprint) {
  checkShard(index, total);
  if (source.format != "idx") {
    const Dataset full = loadDataset(source);
    if (fingerprint)
      *fingerprint = partitionFingerprint(full.labels, full.num_classes, total, spec);
    return full.subset(partitionOf(source, full, total, spec)[index]);
  }
  requireFile(source.images, "images", source.images_at);
  requireFile(source.labels, "labels", source.labels_at);
  return read(source.images_at, [&] {
    return readIdxRows(source.images, source.labels,
                       [&](std::span<const int32_t> labels, int32_t classes) {
                         if (fingerprint) {
                           *fingerprint = partitionFingerprint(labels, classes, total, spec);
                         }
                         try {
                           return partition(labels, classes, total, spec)[index];
                         } catch (const std::exception& e) {
                           // read() puts the position in front.
                           throw std::runtime_error(nameOf(source) + ": " + e.what());
                         }
                       });
  });
}

}  // namespace tern::ml
