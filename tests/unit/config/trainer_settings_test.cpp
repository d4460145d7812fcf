// The settings issue 40 adds (docs/python.md): the worker's trainer section, data.mode local and
// data.eval; the coordinator's model.kind external with its file. Each refusal names its key.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"

using namespace tern::config;

namespace {

std::string writeYaml(const std::string& stem, const std::string& yaml) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("tern-" + stem + "-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "security: none\n" << yaml;
  return path.string();
}

template <class F>
std::string errorOf(F&& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a worker with an external trainer reads no data and needs an endpoint") {
  const auto ok = writeYaml("trainer-ok",
                            "trainer: {kind: external, endpoint: 'ipc:///tmp/t.sock', "
                            "timeout_seconds: 5}\n");
  const WorkerSettings s = loadWorkerSettings(ok);
  CHECK(s.trainer.external());
  CHECK(s.trainer.endpoint == "ipc:///tmp/t.sock");
  CHECK(s.trainer.timeout_seconds == 5.0);
  CHECK(s.data.format.empty());
  CHECK(s.data_mode == "local");
  const auto with_data = writeYaml(
      "trainer-data",
      "trainer: {kind: external, endpoint: 'ipc:///tmp/t.sock'}\ndata: {format: csv, path: x}\n");
  CHECK(has(errorOf([&] { loadWorkerSettings(with_data); }), "'data' is read by the external"));
  const auto no_endpoint = writeYaml("trainer-noend", "trainer: {kind: external}\n");
  CHECK(has(errorOf([&] { loadWorkerSettings(no_endpoint); }), "needs 'endpoint'"));
  const auto builtin_endpoint =
      writeYaml("trainer-builtin", "trainer: {endpoint: 'ipc:///tmp/t.sock'}\n");
  CHECK(has(errorOf([&] { loadWorkerSettings(builtin_endpoint); }), "needs 'kind: external'"));
}

TEST_CASE("a trainer's tcp endpoint must be a loopback address: its socket has no authentication") {
  for (const char* ok : {"tcp://127.0.0.1:7777", "tcp://127.0.0.2:0", "tcp://[::1]:7777"}) {
    const auto path =
        writeYaml("trainer-lo", std::string("trainer: {kind: external, endpoint: '") + ok + "'}\n");
    CHECK(loadWorkerSettings(path).trainer.endpoint == ok);
  }
  for (const char* bad : {"tcp://0.0.0.0:7777", "tcp://*:7777", "tcp://192.168.1.5:7777",
                          "tcp://localhost:7777", "tcp://eth0:7777", "tcp://[::]:7777"}) {
    const auto path = writeYaml(
        "trainer-any", std::string("trainer: {kind: external, endpoint: '") + bad + "'}\n");
    const std::string why = errorOf([&] { loadWorkerSettings(path); });
    CHECK_MESSAGE(has(why, "only the loopback"), bad, ": ", why);
  }
}

TEST_CASE("data.mode local takes the device's own rows and refuses shard settings") {
  const auto local = writeYaml("local",
                               "data: {mode: local, format: csv, path: mine.csv, eval: "
                               "{format: csv, path: held.csv}}\n");
  const WorkerSettings s = loadWorkerSettings(local);
  CHECK(s.data_mode == "local");
  CHECK(s.eval_data.format == "csv");
  CHECK(s.eval_data.path == "held.csv");
  const auto sharded =
      writeYaml("local-shard",
                "data: {mode: local, format: csv, path: m.csv, shard: {index: 0, total: 2}}\n");
  CHECK(has(errorOf([&] { loadWorkerSettings(sharded); }), "'data.shard' cuts a shard"));
  const auto plain = writeYaml("shard-default", "data: {format: csv, path: m.csv}\n");
  CHECK(loadWorkerSettings(plain).data_mode == "shard");
  CHECK(loadWorkerSettings(plain).eval_data.format.empty());
}

TEST_CASE("model.kind external needs its file and takes no test_data") {
  const auto ok = writeYaml("external", "model: {kind: external, file: model.tern}\n");
  const CoordinatorSettings s = loadCoordinatorSettings(ok);
  CHECK(s.model.kind == "external");
  CHECK(s.model_file == "model.tern");
  CHECK_NOTHROW(requireModelFeatures(s));
  const auto no_file = writeYaml("external-nofile", "model: {kind: external}\n");
  CHECK(has(errorOf([&] { loadCoordinatorSettings(no_file); }), "file"));
  const auto features =
      writeYaml("external-feat", "model: {kind: external, file: m, features: 4}\n");
  CHECK(has(errorOf([&] { loadCoordinatorSettings(features); }), "not read by kind external"));
  const auto tested = writeYaml("external-test",
                                "model: {kind: external, file: m}\ntest_data: {format: "
                                "synthetic, rows: 10, features: 4}\n");
  CHECK(has(errorOf([&] { loadCoordinatorSettings(tested); }), "federated evaluation"));
  const auto builtin_file = writeYaml("builtin-file", "model: {kind: softmax, file: m}\n");
  CHECK(has(errorOf([&] { loadCoordinatorSettings(builtin_file); }), "needs 'kind: external'"));
}

TEST_CASE("a worker with neither data nor an external trainer is told it needs one of them") {
  const auto bare = writeYaml("no-data", "name: w\n");
  const std::string why = errorOf([&] { loadWorkerSettings(bare); });
  CHECK(has(why, "a worker needs 'data'"));
  CHECK(has(why, "kind: external"));
}

TEST_CASE("an external trainer's timeout left out is taken from the round deadline, not set") {
  const auto path =
      writeYaml("trainer-no-timeout", "trainer: {kind: external, endpoint: 'ipc:///tmp/t.sock'}\n");
  CHECK_FALSE(loadWorkerSettings(path).trainer.timeout_seconds.has_value());
  const auto low = writeYaml("trainer-low-timeout",
                             "trainer: {kind: external, endpoint: 'ipc:///tmp/t.sock', "
                             "timeout_seconds: 0.001}\n");
  CHECK(has(errorOf([&] { loadWorkerSettings(low); }), "timeout_seconds"));
}
