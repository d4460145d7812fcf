// The external model's file (server/model_file.hpp): what encodeModelFile writes loads back as
// the same layout and values; a file of the wrong size, a non-finite value, another version, a
// directory or nothing at all is refused, naming the file.
#include "server/model_file.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "trainer.pb.h"

using namespace tern;

namespace {

std::string writeFile(const std::string& stem, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("tern-model-" + stem + "-" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::string errorOf(const std::string& path) {
  ml::ModelSpec spec;
  try {
    server::loadModelFile(path, spec);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

const std::vector<ml::TensorShape> kLayout = {{"conv.weight", {2, 1, 3, 3}}, {"conv.bias", {2}}};

}  // namespace

TEST_CASE("a model file loads back as its layout and values") {
  std::vector<float> values(20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * float(i) - 3.0f;
  const auto path = writeFile("ok", server::encodeModelFile(kLayout, values));
  ml::ModelSpec spec;
  spec.kind = "external";
  server::loadModelFile(path, spec);
  CHECK(spec.tensors == kLayout);
  REQUIRE(spec.initial != nullptr);
  CHECK(*spec.initial == values);
  CHECK(ml::paramsOf(spec) == 20);
  auto model = ml::makeModel(spec);
  std::vector<float> init(20);
  Rng rng(1);
  model->init(init, rng);
  CHECK(init == values);
  CHECK_THROWS_AS(model->accuracy(init, ml::Dataset{}), std::logic_error);
}

TEST_CASE("a damaged or foreign model file is refused, naming the file") {
  CHECK(errorOf(writeFile("short", server::encodeModelFile(kLayout, std::vector<float>(19))))
            .find("bytes of parameters") != std::string::npos);
  std::vector<float> nan(20, 1.0f);
  nan[7] = std::nanf("");
  CHECK(errorOf(writeFile("nan", server::encodeModelFile(kLayout, nan))).find("non-finite") !=
        std::string::npos);
  trainer::ModelFile f;
  f.ParseFromString(server::encodeModelFile(kLayout, std::vector<float>(20)));
  f.set_version(9);
  CHECK(errorOf(writeFile("version", f.SerializeAsString())).find("version 9") !=
        std::string::npos);
  CHECK(errorOf(writeFile("garbage", "\xff\xff\xff\xff not a model")).find("model.file") == 0);
  const auto missing = writeFile("gone", "");
  std::filesystem::remove(missing);
  CHECK(errorOf(missing).find("no such file") != std::string::npos);
  CHECK(errorOf(std::filesystem::temp_directory_path().string()).find("model.file") == 0);
}
