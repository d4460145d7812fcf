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
  CHECK(errorOf("aggregation: {trim_fraction: 0.5}\n").find("trim_fraction") != std::string::npos);
  CHECK(errorOf("aggregation: {max_worker_share: 0}\n").find("max_worker_share") !=
        std::string::npos);
  CHECK(errorOf("aggregation: {robust: krum}\n").find("trimmed_mean") != std::string::npos);
  CHECK(errorOf("stragglers: {probe_every: 0}\n").find("probe_every") != std::string::npos);
}
