#pragma once
// model.kind external: the model file (trainer.proto's ModelFile, written by the Python package:
// docs/python.md) gives the coordinator its layout and initial parameters.
#include <string>

#include "common/ml/model.hpp"

namespace tern::server {

// The largest model file read: kMaxParams values and a layout.
inline constexpr size_t kMaxModelFileBytes = size_t(ml::kMaxParams) * 4 + (16u << 20);

// Fills spec.tensors and spec.initial from the file at `path`. Throws std::runtime_error naming
// the file and what is wrong: missing, not a regular file, not a model file, another version,
// parameters that do not match the layout or are not finite.
void loadModelFile(const std::string& path, ml::ModelSpec& spec);

// The bytes of a model file holding `tensors` and `values` (for tests and tools).
std::string encodeModelFile(const std::vector<ml::TensorShape>& tensors,
                            const std::vector<float>& values);

}  // namespace tern::server
