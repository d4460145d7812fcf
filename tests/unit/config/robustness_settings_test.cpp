// The aggregation and stragglers sections: defaults, the values they take, and the errors.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"

using namespace tern::config;

namespace {

// The coordinator settings of a file holding `yaml` (removed again).
CoordinatorSettings load(const std::string& yaml) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("tern-robustness-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "security: none\n" << yaml;
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{path};
  return loadCoordinatorSettings(path.string());
}

// What loading `yaml` throws as a ConfigError ("" if it loads).
std::string errorOf(const std::string& yaml) {
  try {
    load(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("without the sections: auto share cap, clipping at 10x, no robust rule, bench after 3") {
  const CoordinatorSettings s = load("max_rounds: 5\n");
  CHECK(s.aggregation.max_worker_share == 0.0);
  CHECK(s.aggregation.clip_multiple == 10.0);
  CHECK(s.aggregation.robust == RobustRule::kNone);
  CHECK(s.stragglers.bench_after_misses == 3);
  CHECK(s.stragglers.probe_every == 10);
}

TEST_CASE("the sections' values are read, and a robust rule clips at 2x unless told") {
  const CoordinatorSettings s = load(
      "aggregation: {max_worker_share: 0.3, robust: trimmed_mean, trim_fraction: 0.25}\n"
      "stragglers: {bench_after_misses: 0, probe_every: 4}\n");
  CHECK(s.aggregation.max_worker_share == 0.3);
  CHECK(s.aggregation.robust == RobustRule::kTrimmedMean);
  CHECK(s.aggregation.trim_fraction == 0.25);
  CHECK(s.aggregation.clip_multiple == kRobustClipMultiple);
  CHECK(s.stragglers.bench_after_misses == 0);
  CHECK(s.stragglers.probe_every == 4);
  CHECK(load("aggregation: {robust: median, clip_multiple: 0}\n").aggregation.clip_multiple == 0);
  CHECK(load("aggregation: {max_worker_share: auto}\n").aggregation.max_worker_share == 0.0);
}

TEST_CASE("a clip below 1, a trim of half, a share of 0 and an unknown rule are refused") {
  CHECK(errorOf("aggregation: {clip_multiple: 0.5}\n").find("at least 1") != std::string::npos);
  CHECK(errorOf("aggregation: {robust: trimmed_mean, trim_fraction: 0.5}\n").find("0.49") !=
        std::string::npos);
  CHECK(errorOf("aggregation: {max_worker_share: 0}\n").find("max_worker_share") !=
        std::string::npos);
  CHECK(errorOf("aggregation: {robust: krum}\n").find("trimmed_mean") != std::string::npos);
  CHECK(errorOf("stragglers: {probe_every: 0}\n").find("probe_every") != std::string::npos);
}

TEST_CASE("keys the chosen settings would not read are refused, naming the key") {
  CHECK(errorOf("aggregation: {robust: none, trim_fraction: 0.3}\n").find("trimmed_mean only") !=
        std::string::npos);
  CHECK(errorOf("aggregation: {robust: median, trim_fraction: 0.3}\n").find("trim_fraction") !=
        std::string::npos);
  CHECK(errorOf("aggregation: {robust: trimmed_mean, trim_fraction: 0.3}\n").empty());
  CHECK(errorOf("model: {kind: softmax, hidden: 32}\n").find("mlp only") != std::string::npos);
  CHECK(errorOf("model: {kind: mlp, hidden: 32}\n").empty());
  CHECK(errorOf("allocation: {method: cost-aware, seconds_per_round: 1, bytes_per_round: 100}\n")
            .find("give one of them") != std::string::npos);
}

TEST_CASE("a model past the parameters tern trains and a patience under 0.1 s are refused") {
  const std::string big = errorOf("model: {kind: softmax, features: 67108864, classes: 65536}\n");
  CHECK(big.find("classes") != std::string::npos);
  CHECK(big.find("4398046576640 parameters") != std::string::npos);  // (2^26 + 1) * 2^16
  CHECK(errorOf("model: {kind: softmax, features: 784, classes: 10}\n").empty());
  CHECK(errorOf("model: {kind: softmax, classes: 65536}\n").empty());  // features from the data
  CHECK(errorOf("worker_patience_seconds: 0.05\n").find("worker_patience_seconds") !=
        std::string::npos);
  CHECK(errorOf("worker_patience_seconds: 0.1\n").empty());
}
