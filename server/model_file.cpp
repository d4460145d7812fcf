#include "server/model_file.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "server/checkpoint_file.hpp"
#include "trainer.pb.h"

namespace tern::server {

namespace {

std::vector<ml::TensorShape> layoutOf(const trainer::ModelFile& f) {
  std::vector<ml::TensorShape> out;
  for (const auto& t : f.tensors()) out.push_back({t.name(), {t.shape().begin(), t.shape().end()}});
  return out;
}

}  // namespace

void loadModelFile(const std::string& path, ml::ModelSpec& spec) {
  const auto fail = [&](const std::string& why) {
    throw std::runtime_error("model.file " + path + ": " + why);
  };
  std::optional<std::string> bytes;
  try {
    bytes = readCheckpointFile(path, kMaxModelFileBytes);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  if (!bytes) fail("no such file (write it with tern.save_model_file: docs/python.md)");
  trainer::ModelFile f;
  if (!f.ParseFromString(*bytes)) fail("not a tern model file");
  if (f.version() != trainer::TRAINER_PROTOCOL_VERSION) {
    fail("version " + std::to_string(f.version()) + ", this coordinator reads version " +
         std::to_string(int(trainer::TRAINER_PROTOCOL_VERSION)));
  }
  auto tensors = layoutOf(f);
  const uint64_t n = ml::paramsOf(tensors);
  if (tensors.empty() || n == 0 || n > ml::kMaxParams) {
    fail("a layout of " + std::to_string(n) + " values (1 to " + std::to_string(ml::kMaxParams) +
         " taken)");
  }
  if (f.parameters().size() != n * sizeof(float)) {
    fail(std::to_string(f.parameters().size()) + " bytes of parameters, the layout " +
         ml::describeLayout(tensors) + " needs " + std::to_string(n * sizeof(float)));
  }
  auto values = std::make_shared<std::vector<float>>(n);
  std::memcpy(values->data(), f.parameters().data(), f.parameters().size());
  for (float v : *values) {
    if (!std::isfinite(v)) fail("the initial parameters hold a non-finite value");
  }
  spec.tensors = std::move(tensors);
  spec.initial = std::move(values);
}

std::string encodeModelFile(const std::vector<ml::TensorShape>& tensors,
                            const std::vector<float>& values) {
  trainer::ModelFile f;
  f.set_version(trainer::TRAINER_PROTOCOL_VERSION);
  for (const auto& t : tensors) {
    auto* w = f.add_tensors();
    w->set_name(t.name);
    for (uint64_t d : t.shape) w->add_shape(d);
  }
  f.set_parameters(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return f.SerializeAsString();
}

}  // namespace tern::server
