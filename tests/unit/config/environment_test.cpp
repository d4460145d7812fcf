// Environment overrides of the daemons' files: TERN_<KEY>[__<KEY>...] sets a key path, only
// variables naming a top-level key are settings, and a bad value is said at its variable.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"

using namespace tern::config;

namespace {

std::string writeFile(const std::string& name, const std::string& text) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tern-env-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

const std::string kCoordinator =
    "max_rounds: 10\nmodel: {kind: softmax, features: 4, classes: 2}\n"
    "allocation: {method: uniform, mean_ratio: 0.5}\nsecurity: none\n";

std::string loadError(const std::string& file, const Environment& env) {
  try {
    loadCoordinatorSettings(file, env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a TERN_ variable overrides its key, nested levels joined by a double underscore") {
  const auto file = writeFile("coordinator.yaml", kCoordinator);
  const auto plain = loadCoordinatorSettings(file, {});
  CHECK(plain.max_rounds == 10);
  CHECK(plain.allocation.method == tern::allocation::Method::kUniform);
  const auto s = loadCoordinatorSettings(file, {{"TERN_MAX_ROUNDS", "3"},
                                                {"TERN_ALLOCATION__METHOD", "dagc-r"},
                                                {"TERN_OPTIMIZER__LR", "0.25"},
                                                {"TERN_LOGGING", "{level: warn, format: json}"}});
  CHECK(s.max_rounds == 3);
  CHECK(s.allocation.method == tern::allocation::Method::kDagcR);
  CHECK(s.allocation.budget.mean_ratio == doctest::Approx(0.5));  // the file's, kept
  CHECK(s.optimizer.lr == doctest::Approx(0.25));                 // a section the file lacks
  CHECK(s.logging.level == "warn");
  CHECK(s.logging.json);
}

TEST_CASE("variables that name no key of the file are not settings and are left alone") {
  const auto file = writeFile("coordinator-other.yaml", kCoordinator);
  const auto s = loadCoordinatorSettings(file, {{"TERN_COORDINATOR_ARGS", "--http 127.0.0.1:9464"},
                                                {"TERN_WERROR", "0"},
                                                {"TERN_", "x"},
                                                {"TERN___MAX_ROUNDS", "4"},
                                                {"OTHER_MAX_ROUNDS", "5"}});
  CHECK(s.max_rounds == 10);
  // The worker's file has other keys: the coordinator's endpoint is one of them.
  const auto wfile = writeFile(
      "worker.yaml", "data: {format: synthetic, rows: 10, features: 4}\nsecurity: none\n");
  const auto w = loadWorkerSettings(wfile, {{"TERN_COORDINATOR", "tcp://127.0.0.1:6000"},
                                            {"TERN_MAX_ROUNDS", "3"},
                                            {"TERN_COMPRESSION__NAME", "sq"}});
  CHECK(w.coordinator == "tcp://127.0.0.1:6000");
  CHECK(w.compressor.name == "sq");
}

TEST_CASE("a bad value or an unknown key from the environment is said at its variable") {
  const auto file = writeFile("coordinator-bad.yaml", kCoordinator);
  CHECK(loadError(file, {{"TERN_MAX_ROUNDS", "lots"}}).rfind("environment TERN_MAX_ROUNDS: ", 0) ==
        0);
  CHECK(loadError(file, {{"TERN_ALLOCATION__COLOUR", "blue"}}) ==
        "environment TERN_ALLOCATION__COLOUR: unknown key 'allocation.colour'");
  CHECK(loadError(file, {{"TERN_ALLOCATION", "{method: dagc-r, colour: blue}"}}) ==
        "environment TERN_ALLOCATION: unknown key 'allocation.colour'");
  CHECK(loadError(file, {{"TERN_ALLOCATION__METHOD", "best"}})
            .rfind("environment TERN_ALLOCATION__METHOD: 'allocation.method' must be one of", 0) ==
        0);
  CHECK(loadError(file, {{"TERN_MAX_ROUNDS", "[unclosed"}})
            .rfind("environment TERN_MAX_ROUNDS: not a YAML value", 0) == 0);
  // A problem in the file itself is still said at its line.
  const auto bad = writeFile("coordinator-badfile.yaml", kCoordinator + "eval_every: often\n");
  CHECK(loadError(bad, {{"TERN_MAX_ROUNDS", "3"}}).rfind(bad + ":5:", 0) == 0);
}
