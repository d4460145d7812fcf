#include "common/ml/data_source.hpp"

#include <filesystem>
#include <stdexcept>

namespace tern::ml {
namespace {

void requireFile(const std::string& path, const char* what) {
  if (path.empty()) throw std::runtime_error(std::string("no ") + what + " file configured");
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error(path + ": " + what + " file not found");
  }
}

}  // namespace

Dataset loadDataset(const DataSource& source) {
  if (source.format == "idx") {
    requireFile(source.images, "images");
    requireFile(source.labels, "labels");
    return readIdx(source.images, source.labels);
  }
  if (source.format == "libsvm") {
    requireFile(source.path, "libsvm");
    return readLibsvm(source.path, source.features);
  }
  if (source.format == "csv") {
    requireFile(source.path, "csv");
    return readCsv(source.path, source.label_column);
  }
  if (source.format == "synthetic") {
    return syntheticDense(source.rows, source.features, source.classes, source.seed);
  }
  throw std::runtime_error("unknown data format '" + source.format + "'");
}

Dataset loadShard(const Dataset& full, size_t index, size_t total, const PartitionSpec& spec) {
  if (total == 0 || index >= total) {
    throw std::runtime_error("shard index " + std::to_string(index) + " out of range for " +
                             std::to_string(total) + " shards");
  }
  auto parts = partition(full.labels, full.num_classes, total, spec);
  return full.subset(parts[index]);
}

}  // namespace tern::ml
