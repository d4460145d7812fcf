#pragma once
// What a worker knows of the data it trains on: told to the coordinator in every join (rows,
// labels, an external trainer's layout), and what a welcome's model is checked against.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"

namespace tern::worker {

struct LocalData {
  uint64_t rows = 0;
  std::vector<uint64_t> label_histogram;     // index = label
  uint64_t eval_rows = 0;                    // held-out rows it evaluates on (0: none)
  std::shared_ptr<const ml::Dataset> shard;  // the built-in trainer's rows (null: external)
  std::vector<ml::TensorShape> tensors;      // the external trainer's layout (empty: built-in)
  bool external() const { return shard == nullptr; }
};

// A built-in trainer's data: its shard's rows and labels.
LocalData localDataOf(std::shared_ptr<const ml::Dataset> shard);

}  // namespace tern::worker
