#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"

using namespace tern::config;

namespace {

std::string writeTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("tern-config-" + name);
  std::ofstream(path) << text;
  return path.string();
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an unknown key is rejected with the file, line and column of the key") {
  auto f = writeTemp("unknown.yaml", "min_workers: 2\nmodel:\n  kind: softmax\n  colour: blue\n");
  auto msg = errorOf([&] { loadCoordinatorSettings(f); });
  CHECK(msg == f + ":4:3: unknown key 'model.colour'");
}

TEST_CASE("a value of the wrong type names its position") {
  auto f = writeTemp("type.yaml", "max_rounds: lots\n");
  auto msg = errorOf([&] { loadCoordinatorSettings(f); });
  CHECK(msg.rfind(f + ":1:13: 'max_rounds' has the wrong type", 0) == 0);
}

TEST_CASE("an out-of-range value names its position and the allowed range") {
  auto f = writeTemp("range.yaml", "optimizer:\n  momentum: 1.5\n");
  auto msg = errorOf([&] { loadCoordinatorSettings(f); });
  CHECK(msg.rfind(f + ":2:13: 'momentum' must be in [", 0) == 0);
}

TEST_CASE("an unknown enumeration value lists the allowed ones") {
  auto f = writeTemp("enum.yaml", "allocation:\n  method: random\n");
  auto msg = errorOf([&] { loadCoordinatorSettings(f); });
  CHECK(msg.find(":2:11: 'allocation.method' must be one of uniform, dagc-r") != std::string::npos);
}

TEST_CASE("a YAML syntax error is reported with its position") {
  auto f = writeTemp("syntax.yaml", "min_workers: [1, 2\n");
  auto msg = errorOf([&] { loadCoordinatorSettings(f); });
  CHECK(msg.rfind(f + ":", 0) == 0);
  CHECK(msg.size() > f.size() + 4);
}

TEST_CASE("a missing configuration file is a clear error") {
  auto msg = errorOf([] { loadWorkerSettings("/nonexistent/tern.yaml"); });
  CHECK(msg == "/nonexistent/tern.yaml:1:1: configuration file not found");
}

TEST_CASE("a worker's shard index must be below the shard total") {
  auto f = writeTemp("shard.yaml",
                     "data:\n  format: synthetic\n  rows: 10\n  features: 3\n  shard: {index: 4, "
                     "total: 4}\n");
  auto msg = errorOf([&] { loadWorkerSettings(f); });
  CHECK(msg.find("'index' must be in [0, 3]") != std::string::npos);
}

TEST_CASE("a complete worker configuration is read into the struct") {
  auto f = writeTemp("worker.yaml",
                     "name: pi-7\ncoordinator: tcp://10.0.0.1:5555\ndata:\n  format: synthetic\n"
                     "  rows: 100\n  features: 8\n  shard: {index: 1, total: 3}\n"
                     "  partition: {dirichlet_alpha: 0.5, volume_ratio: 10, seed: 9}\n"
                     "compression: {name: sq, error_feedback: false}\n"
                     "tuning: {method: cat, recompute_every: 200, cost_model: packet}\n"
                     "link: {calibration_packets: [2, 8], packet_bytes: 1400}\n");
  auto s = loadWorkerSettings(f);
  CHECK(s.name == "pi-7");
  CHECK(s.shard_index == 1);
  CHECK(s.shard_total == 3);
  CHECK(s.partition.dirichlet_alpha == doctest::Approx(0.5));
  CHECK(s.partition.volume_ratio == doctest::Approx(10));
  CHECK(s.compressor.name == "sq");
  CHECK_FALSE(s.error_feedback);
  CHECK(s.tuning.method == "cat");
  CHECK(s.tuning.recompute_every == 200);
  CHECK(s.link.calibration_packets == std::vector<size_t>{2, 8});
  CHECK(s.link.packet_bytes == 1400);
}

TEST_CASE("the shipped example configurations parse") {
  const std::string root = TERN_SOURCE_DIR;
  CHECK_NOTHROW(loadCoordinatorSettings(root + "/deploy/config/coordinator.yaml"));
  CHECK_NOTHROW(loadWorkerSettings(root + "/deploy/config/worker.yaml"));
  CHECK_NOTHROW(loadSimSettings(root + "/deploy/config/sim-quick.yaml"));
}
