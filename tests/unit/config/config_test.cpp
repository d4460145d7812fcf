#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"

using namespace tern::config;

namespace {

// This process's own scratch directory (ctest runs test cases as parallel processes, which
// must not write each other's files), removed at exit.
const std::filesystem::path& scratchDir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("tern-config-test-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

std::string writeTemp(const std::string& name, const std::string& text) {
  auto path = scratchDir() / ("tern-config-" + name);
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

TEST_CASE("max_workers below min_workers is refused at the key that makes it so") {
  auto f = writeTemp("maxw.yaml", "min_workers: 5\nmax_workers: 4\nsecurity: none\n");
  auto msg = errorOf([&] { loadCoordinatorSettings(f); });
  CHECK(msg.rfind(f + ":2:", 0) == 0);
  CHECK(msg.find("min_workers (5) is more than max_workers (4)") != std::string::npos);
  auto g = writeTemp("maxw-ok.yaml", "min_workers: 4\nmax_workers: 4\nsecurity: none\n");
  CHECK(loadCoordinatorSettings(g).max_workers == 4);
  auto h = writeTemp("maxw-default.yaml", "min_workers: 4\nsecurity: none\n");
  CHECK(loadCoordinatorSettings(h).max_workers == 1000);
  // Not given, it is at least min_workers: a configuration from before it keeps working.
  auto big = writeTemp("maxw-big.yaml", "min_workers: 2000\nsecurity: none\n");
  CHECK(loadCoordinatorSettings(big).max_workers == 2000);
}

TEST_CASE("a range error shows its bounds and the value as they are, not rounded to six places") {
  auto lr = writeTemp("range-lr.yaml", "optimizer: {lr: 0}\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(lr); }) ==
        lr + ":1:17: 'lr' must be in [1e-12, 1000000], got 0");
  auto momentum = writeTemp("range-momentum.yaml", "optimizer: {momentum: 0.99995}\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(momentum); }) ==
        momentum + ":1:23: 'momentum' must be in [0, 0.9999], got 0.99995");
  auto rounds = writeTemp("range-rounds.yaml", "max_rounds: 0\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(rounds); }) ==
        rounds + ":1:13: 'max_rounds' must be in [1, 1099511627776], got 0");
  // A bound the check excludes is said as one.
  auto share = writeTemp("range-share.yaml",
                         "data: {format: synthetic, rows: 10, features: 3}\nsecurity: none\n"
                         "link: {probe_link_share: 0}\n");
  CHECK(errorOf([&] { loadWorkerSettings(share); }) ==
        share + ":3:26: 'probe_link_share' must be > 0 and <= 1, got 0");
  CHECK(formatNumber(1e-12) == "1e-12");
  CHECK(formatNumber(1e6) == "1000000");
  CHECK(formatNumber(0.1) == "0.1");
  CHECK(formatNumber(-2.5) == "-2.5");
  CHECK(formatNumber(uint64_t{1} << 40) == "1099511627776");
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

TEST_CASE("a second YAML document is refused, whether or not it parses") {
  auto parses = writeTemp("two-docs.yaml", "min_workers: 2\n---\nmin_workers: 3\n");
  auto msg = errorOf([&] { loadCoordinatorSettings(parses); });
  CAPTURE(msg);
  CHECK(msg.rfind(parses + ":3:1: a second YAML document", 0) == 0);
  auto broken = writeTemp("two-docs-broken.yaml", "min_workers: 2\n---\nmin_workers: [1, 2\n");
  auto broken_msg = errorOf([&] { loadCoordinatorSettings(broken); });
  CHECK(broken_msg.rfind(broken + ":", 0) == 0);
  CHECK(broken_msg.size() > broken.size() + 4);
  // One document opened by `---` is still one document.
  auto one = writeTemp("one-doc.yaml", "---\nmin_workers: 2\nsecurity: none\n");
  CHECK(loadCoordinatorSettings(one).min_workers == 2);
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

TEST_CASE("a worker name the coordinator would refuse at every join is refused at its line") {
  const std::string data = "data: {format: synthetic, rows: 10, features: 3}\nsecurity: none\n";
  auto empty = writeTemp("name-empty.yaml", data + "name: \"\"\n");
  CHECK(errorOf([&] { loadWorkerSettings(empty); }) ==
        empty + ":3:7: 'name' must not be empty: it is the worker's identity at the coordinator");
  auto long_name = writeTemp("name-long.yaml", data + "name: " + std::string(257, 'n') + "\n");
  CHECK(errorOf([&] { loadWorkerSettings(long_name); }) ==
        long_name + ":3:7: 'name' must be at most 256 bytes, got 257");
  auto longest = writeTemp("name-256.yaml", data + "name: " + std::string(256, 'n') + "\n");
  CHECK(loadWorkerSettings(longest).name.size() == 256);
}

TEST_CASE("a complete worker configuration is read into the struct") {
  auto f = writeTemp("worker.yaml",
                     "name: pi-7\ncoordinator: tcp://10.0.0.1:5555\ndata:\n  format: synthetic\n"
                     "  rows: 100\n  features: 8\n  shard: {index: 1, total: 3}\n"
                     "  partition: {dirichlet_alpha: 0.5, volume_ratio: 10, seed: 9}\n"
                     "compression: {name: sq, error_feedback: false}\n"
                     "tuning: {method: cat, recompute_every: 200, cost_model: packet}\n"
                     "link: {calibration_packets: [2, 8], packet_bytes: 1400}\n"
                     "security: none\n");
  auto s = loadWorkerSettings(f);
  CHECK(s.name == "pi-7");
  CHECK(s.shard_index == 1);
  CHECK(s.shard_total == 3);
  CHECK(s.partition.dirichlet_alpha == doctest::Approx(0.5));
  CHECK(s.partition.volume_ratio == doctest::Approx(10));
  CHECK(s.compressor.name == "sq");
  CHECK_FALSE(s.error_feedback);
  CHECK(s.tuning.method == tern::tuning::TunerKind::kCat);
  CHECK(s.tuning.recompute_every == 200);
  CHECK(s.link.calibration_packets == std::vector<size_t>{2, 8});
  CHECK(s.link.packet_bytes == 1400);
}

TEST_CASE("every strategy the configuration names is parsed into its kind") {
  const std::string data = "data: {format: synthetic, rows: 10, features: 4}\nsecurity: none\n";
  const auto worker = loadWorkerSettings(writeTemp(
      "kinds.yaml", data + "compression: {name: stochastic}\n"
                           "tuning: {method: dynamic, step: coordinator, cost_model: payload}\n"));
  CHECK(tern::compression::compressorKindNamed(worker.compressor.name) ==
        tern::compression::CompressorKind::kStochastic);
  CHECK(worker.tuning.method == tern::tuning::TunerKind::kDynamic);
  CHECK(worker.tuning.step == StepRule::kCoordinator);
  CHECK(worker.tuning.cost_model == tern::costmodel::CostModelKind::kPayload);
  const auto defaults = loadWorkerSettings(writeTemp("kinds-default.yaml", data));
  CHECK(tern::compression::compressorKindNamed(defaults.compressor.name) ==
        tern::compression::CompressorKind::kTopK);
  CHECK(defaults.tuning.method == tern::tuning::TunerKind::kCat);
  CHECK(defaults.tuning.step == StepRule::kAuto);
  CHECK(defaults.tuning.cost_model == tern::costmodel::CostModelKind::kMeasured);
  const auto paper = loadWorkerSettings(
      writeTemp("kinds-paper.yaml", data + "tuning: {method: cat, step: paper}\n"));
  CHECK(paper.tuning.method == tern::tuning::TunerKind::kCat);
  CHECK(paper.tuning.step == StepRule::kPaper);
  const auto cat_paper =
      loadWorkerSettings(writeTemp("kinds-cat-paper.yaml", data + "tuning: {method: cat-paper}\n"));
  CHECK(cat_paper.tuning.method == tern::tuning::TunerKind::kCatPaper);
  const auto coordinator = loadCoordinatorSettings(
      writeTemp("kinds-coordinator.yaml", "allocation: {method: cost-aware}\nsecurity: none\n"));
  CHECK(coordinator.allocation.method == tern::allocation::Method::kCostAware);
  // Unsaid, the allocation is the data- and link-aware one.
  const auto unsaid = loadCoordinatorSettings(writeTemp("kinds-unsaid.yaml", "security: none\n"));
  CHECK(unsaid.allocation.method == tern::allocation::Method::kCostAware);
  const auto uniform = loadCoordinatorSettings(
      writeTemp("kinds-uniform.yaml", "allocation: {method: uniform}\nsecurity: none\n"));
  CHECK(uniform.allocation.method == tern::allocation::Method::kUniform);
}

TEST_CASE("the shipped example configurations parse") {
  const std::string root = TERN_SOURCE_DIR;
  CHECK_NOTHROW(loadCoordinatorSettings(root + "/deploy/config/coordinator.yaml"));
  CHECK_NOTHROW(loadWorkerSettings(root + "/deploy/config/worker.yaml"));
  CHECK_NOTHROW(loadSimSettings(root + "/deploy/config/sim-quick.yaml"));
  CHECK_NOTHROW(loadSimSettings(root + "/deploy/config/sim-cat.yaml"));
}

namespace {

const std::string kWorkerBody =
    "data:\n  format: synthetic\n  rows: 10\n  features: 3\n  shard: {index: 0, total: 1}\n";

}  // namespace

TEST_CASE("a daemon configuration without a security section is refused and says how to choose") {
  auto c = writeTemp("nosec-c.yaml", "min_workers: 2\n");
  auto msg = errorOf([&] { loadCoordinatorSettings(c); });
  CHECK(msg.rfind(c + ":1:1: missing 'security'", 0) == 0);
  CHECK(msg.find("security: none") != std::string::npos);
  CHECK(msg.find("mode: curve") != std::string::npos);
  auto w = writeTemp("nosec-w.yaml", kWorkerBody);
  CHECK(errorOf([&] { loadWorkerSettings(w); }).rfind(w + ":1:1: missing 'security'", 0) == 0);
}

TEST_CASE("security none as a scalar or as a mode both mean plaintext") {
  auto a = writeTemp("sec-none-a.yaml", "security: none\n");
  auto b = writeTemp("sec-none-b.yaml", "security: {mode: none}\n");
  CHECK_FALSE(loadCoordinatorSettings(a).security.curve());
  CHECK(loadCoordinatorSettings(b).security.mode == "none");
}

TEST_CASE("curve sections name the secret key and the coordinator's allowlist or server key") {
  auto c = loadCoordinatorSettings(writeTemp(
      "sec-curve-c.yaml", "security: {mode: curve, secret_key_file: c.key, allowlist: /k/w}\n"));
  auto w = loadWorkerSettings(writeTemp(
      "sec-curve-w.yaml",
      kWorkerBody +
          "security: {mode: curve, secret_key_file: w.key, server_public_key_file: c.pub}\n"));
  CHECK(c.security.curve());
  CHECK(c.security.secret_key_file == "c.key");
  CHECK(c.security.allowlist == "/k/w");
  CHECK(w.security.curve());
  CHECK(w.security.secret_key_file == "w.key");
  CHECK(w.security.server_public_key_file == "c.pub");
}

TEST_CASE("security settings that cannot work name their position") {
  auto word = writeTemp("sec-word.yaml", "security: off\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(word);
        }).rfind(word + ":1:11: 'security' must be 'none' or a mapping", 0) == 0);
  auto no_list =
      writeTemp("sec-nolist.yaml", "security:\n  mode: curve\n  secret_key_file: c.key\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(no_list);
        }).find("missing required key 'security.allowlist'") != std::string::npos);
  auto keys_no_curve =
      writeTemp("sec-keys-none.yaml", "security:\n  mode: none\n  secret_key_file: c.key\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(keys_no_curve); }) ==
        keys_no_curve + ":3:20: 'security.secret_key_file' needs 'mode: curve'");
  // The server key belongs to a worker's configuration, not to the coordinator's.
  auto wrong_role = writeTemp("sec-role.yaml",
                              "security: {mode: curve, secret_key_file: c.key, allowlist: a,\n"
                              "           server_public_key_file: c.pub}\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(wrong_role); }) ==
        wrong_role + ":2:12: unknown key 'security.server_public_key_file'");
  auto empty = writeTemp("sec-empty.yaml",
                         "security: {mode: curve, secret_key_file: '', "
                         "allowlist: a}\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(empty);
        }).find("'security.secret_key_file' is empty") != std::string::npos);
  auto bad_mode = writeTemp("sec-mode.yaml", "security: {mode: tls}\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(bad_mode);
        }).find("'security.mode' must be one of none, curve, got 'tls'") != std::string::npos);
}

TEST_CASE("the simulator has no sockets and so no security section") {
  auto sim = writeTemp("sim-sec.yaml",
                       "train_data: {format: synthetic, rows: 10, features: 3}\nsecurity: none\n");
  CHECK(errorOf([&] { loadSimSettings(sim); }) == sim + ":2:1: unknown key 'security'");
}

TEST_CASE("the http section sets the daemons' endpoint and refuses what cannot bind") {
  auto c = loadCoordinatorSettings(
      writeTemp("http-c.yaml",
                "security: none\nhttp: {bind: '0.0.0.0:9100', url_file: /run/tern/url, "
                "stale_after_seconds: 12}\n"));
  CHECK(c.http.bind == "0.0.0.0:9100");
  CHECK(c.http.url_file == "/run/tern/url");
  CHECK(c.http.stale_after_seconds == doctest::Approx(12.0));
  auto w = loadWorkerSettings(
      writeTemp("http-w.yaml", kWorkerBody + "security: none\nhttp:\n  bind: 127.0.0.1:0\n"));
  CHECK(w.http.bind == "127.0.0.1:0");
  CHECK(w.http.url_file.empty());
  CHECK(w.http.stale_after_seconds == doctest::Approx(30.0));
  CHECK(loadWorkerSettings(writeTemp("http-none.yaml", kWorkerBody + "security: none\n"))
            .http.bind.empty());

  auto noport = writeTemp("http-noport.yaml", "security: none\nhttp: {bind: localhost}\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(noport);
        }).rfind(noport + ":2:14: 'http.bind' must be HOST:PORT", 0) == 0);
  auto nobind = writeTemp("http-nobind.yaml", "security: none\nhttp: {url_file: x}\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(nobind); }).find("bind") != std::string::npos);
  auto extra = writeTemp("http-extra.yaml", "security: none\nhttp: {bind: ':1', port: 3}\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(extra); }).find("unknown key 'http.port'") !=
        std::string::npos);
}

TEST_CASE("the allocation's round overhead is read for the cost-aware deadline") {
  auto c = loadCoordinatorSettings(writeTemp(
      "overhead.yaml",
      "security: none\nallocation: {method: cost-aware, round_overhead_seconds: 0.35}\n"));
  CHECK(c.allocation.budget.round_overhead_seconds == doctest::Approx(0.35));
  auto bad =
      writeTemp("overhead-bad.yaml", "security: none\nallocation:\n  round_overhead_seconds: -1\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(bad);
        }).find("'round_overhead_seconds' must be in [") != std::string::npos);
}

TEST_CASE("whole-packet pricing is read, and refused without a link-seconds budget") {
  auto c = loadCoordinatorSettings(
      writeTemp("packets.yaml",
                "security: none\nallocation: {method: cost-aware, seconds_per_round: 0.06, "
                "whole_packets: true}\n"));
  CHECK(c.allocation.budget.whole_packets);
  CHECK(c.allocation.budget.seconds_per_round == doctest::Approx(0.06));
  auto bad =
      writeTemp("packets-bad.yaml",
                "security: none\nallocation:\n  method: cost-aware\n  whole_packets: true\n");
  const std::string error = errorOf([&] { loadCoordinatorSettings(bad); });
  CHECK(error.find("packets-bad.yaml:4:") != std::string::npos);
  CHECK(error.find("needs 'allocation.seconds_per_round' above 0") != std::string::npos);
}

TEST_CASE(
    "dagc-a is refused at load time without a mean threshold, where its allocator would throw at "
    "the first join") {
  auto ok = loadCoordinatorSettings(writeTemp(
      "dagc-a.yaml", "security: none\nallocation: {method: dagc-a, mean_threshold: 0.01}\n"));
  CHECK(ok.allocation.budget.mean_threshold == doctest::Approx(0.01));
  const std::string missing = errorOf([&] {
    loadCoordinatorSettings(
        writeTemp("dagc-a-bad.yaml", "security: none\nallocation:\n  method: dagc-a\n"));
  });
  CHECK(missing.find("dagc-a-bad.yaml:3:") != std::string::npos);
  CHECK(missing.find("needs 'allocation.mean_threshold' above 0") != std::string::npos);
  const std::string zero = errorOf([&] {
    loadCoordinatorSettings(
        writeTemp("dagc-a-zero.yaml",
                  "security: none\nallocation:\n  method: dagc-a\n  mean_threshold: 0\n"));
  });
  CHECK(zero.find("dagc-a-zero.yaml:4:") != std::string::npos);
}

TEST_CASE("the hybrid's drift factor is read, and refused between 0 and 1") {
  const std::string data = "data: {format: synthetic, rows: 10, features: 4}\nsecurity: none\n";
  auto w = loadWorkerSettings(writeTemp(
      "drift.yaml", data + "tuning: {method: cat, recompute_every: 200, recompute_drift: 1.5}\n"));
  CHECK(w.tuning.recompute_drift == doctest::Approx(1.5));
  CHECK(loadWorkerSettings(writeTemp("drift-default.yaml", data + "tuning: {method: cat}\n"))
            .tuning.recompute_drift == doctest::Approx(1.25));
  auto bad = writeTemp("drift-bad.yaml", data + "tuning:\n  method: cat\n  recompute_drift: 0.5\n");
  const std::string error = errorOf([&] { loadWorkerSettings(bad); });
  CHECK(error.find("drift-bad.yaml:5:") != std::string::npos);
  CHECK(error.find("'recompute_drift' must be 0 (off) or a factor > 1") != std::string::npos);
}

TEST_CASE(
    "the step the tuner prices levels at is auto by default, the coordinator's or the paper's") {
  const std::string data = "data: {format: synthetic, rows: 10, features: 4}\nsecurity: none\n";
  CHECK(loadWorkerSettings(writeTemp("step-default.yaml", data + "tuning: {method: cat}\n"))
            .tuning.step == StepRule::kAuto);
  CHECK(loadWorkerSettings(
            writeTemp("step-coord.yaml", data + "tuning: {method: cat, step: coordinator}\n"))
            .tuning.step == StepRule::kCoordinator);
  CHECK(loadWorkerSettings(
            writeTemp("step-paper.yaml", data + "tuning: {method: cat, step: paper}\n"))
            .tuning.step == StepRule::kPaper);
  auto bad = writeTemp("step-bad.yaml", data + "tuning:\n  method: cat\n  step: lr\n");
  const std::string error = errorOf([&] { loadWorkerSettings(bad); });
  CHECK(error.find("step-bad.yaml:5:") != std::string::npos);
  CHECK(error.find("coordinator") != std::string::npos);
}

TEST_CASE("a NaN or infinite number is out of every range, with its position") {
  auto f = writeTemp("nan.yaml", "optimizer:\n  lr: .nan\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(f); }).rfind(f + ":2:7: 'lr' must be in [", 0) == 0);
  auto g = writeTemp("inf.yaml", "optimizer:\n  momentum: .inf\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(g);
        }).rfind(g + ":2:13: 'momentum' must be in [", 0) == 0);
}

TEST_CASE("an infinite value is refused even where the range is unbounded") {
  auto f = writeTemp("inf_threshold.yaml",
                     "data: {format: synthetic, rows: 10, features: 3}\n"
                     "compression: {name: threshold, threshold: .inf}\nsecurity: none\n");
  CHECK(errorOf([&] { loadWorkerSettings(f); }) ==
        f + ":2:43: 'threshold' must be a finite number >= 0, got inf");
}

TEST_CASE("a known key without a value is named as such, not as unknown") {
  auto f = writeTemp("empty.yaml", "min_workers: 2\neval_every:\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(f); }) == f + ":2:1: 'eval_every' has no value");
  // A section looked up before it is read, too.
  auto g = writeTemp("empty_section.yaml", "min_workers: 2\ntest_data:\nsecurity: none\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(g); }) == g + ":2:1: 'test_data' has no value");
  // Any section without a value, read directly or nested; an empty mapping is fine.
  auto h = writeTemp("empty_optimizer.yaml", "min_workers: 2\noptimizer:\nsecurity: none\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(h); }) == h + ":2:1: 'optimizer' has no value");
  auto w = writeTemp("empty_tuning.yaml",
                     "data: {format: synthetic, rows: 10, features: 3}\nsecurity: none\ntuning:\n");
  CHECK(errorOf([&] { loadWorkerSettings(w); }) == w + ":3:1: 'tuning' has no value");
  auto ok = writeTemp("empty_map.yaml", "min_workers: 2\noptimizer: {}\nsecurity: none\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(ok); }).empty());
}

TEST_CASE("a key given twice is refused at the second, naming the first line") {
  auto f = writeTemp("dup.yaml", "optimizer: {lr: 0.1, lr: 0.2}\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(f); }) ==
        f + ":1:22: duplicate key 'optimizer.lr' (first at line 1)");
  auto g = writeTemp("dup2.yaml", "max_rounds: 5\nmin_workers: 1\nmax_rounds: 6\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(g); }) ==
        g + ":3:1: duplicate key 'max_rounds' (first at line 1)");
}

TEST_CASE("synthetic data: sparse is selectable and a test share that leaves no rows is refused") {
  auto f = writeTemp("sparse.yaml",
                     "data: {format: synthetic_sparse, rows: 50, features: 400, nnz_per_row: 9}\n"
                     "security: none\n");
  auto s = loadWorkerSettings(f);
  CHECK(s.data.format == "synthetic_sparse");
  CHECK(s.data.nnz_per_row == 9);
  CHECK(s.data.split == tern::ml::DataSource::Split::kTrain);
  auto g = writeTemp("nnz.yaml",
                     "data: {format: synthetic_sparse, rows: 50, features: 4, nnz_per_row: 9}\n"
                     "security: none\n");
  CHECK(errorOf([&] { loadWorkerSettings(g); }).find("'nnz_per_row' must not exceed 'features'") !=
        std::string::npos);
  auto h = writeTemp("frac.yaml",
                     "data: {format: synthetic, rows: 1, features: 4, test_fraction: 0.9}\n"
                     "security: none\n");
  CHECK(errorOf([&] { loadWorkerSettings(h); }) ==
        h + ":1:64: 'test_fraction' of 'rows' must leave at least one training row");
  auto t = writeTemp("test_frac.yaml",
                     "test_data: {format: synthetic, rows: 3, features: 4, test_fraction: 0.1}\n"
                     "security: none\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(t); }) ==
        t + ":1:69: 'test_fraction' of 'rows' must leave at least one test and one training row");
  auto all = writeTemp("all_rows.yaml",
                       "data: {format: synthetic, rows: 3, features: 4, test_fraction: 0}\n"
                       "security: none\n");
  CHECK(loadWorkerSettings(all).data.test_fraction == 0.0);
  auto c = writeTemp("test_split.yaml",
                     "test_data: {format: synthetic, rows: 10, features: 4}\nsecurity: none\n");
  CHECK(loadCoordinatorSettings(c).test_data.split == tern::ml::DataSource::Split::kTest);
}

TEST_CASE("a data file's configuration position is kept for the loader's errors") {
  auto f = writeTemp("datafile.yaml",
                     "data:\n  format: idx\n  images: /nonexistent/img.gz\n  labels: /nonexistent/"
                     "lab.gz\nsecurity: none\n");
  auto s = loadWorkerSettings(f);
  CHECK(s.data.images_at == f + ":3:11");
  CHECK(s.data.labels_at == f + ":4:11");
  std::string msg;
  try {
    tern::ml::loadDataset(s.data);
  } catch (const std::exception& e) {
    msg = e.what();
  }
  CHECK(msg == f + ":3:11: images file not found: /nonexistent/img.gz");
}

TEST_CASE("a packet that costs nothing is refused at its line") {
  auto f = writeTemp("free_packet.yaml",
                     "data: {format: synthetic, rows: 10, features: 3}\nsecurity: none\n"
                     "tuning:\n  cost_model: packet\n  c_packet: 0\n");
  CHECK(errorOf([&] { loadWorkerSettings(f); }) ==
        f + ":5:13: 'c_packet' must be a finite number > 0, got 0");
}

TEST_CASE("calibration probe sizes outside [1, 4096] packets, or too many of them, are refused") {
  const std::string head = "data: {format: synthetic, rows: 10, features: 3}\nsecurity: none\n";
  for (const std::string sizes : {"[1, 100000000]", "[0, 4]", "[4097]"}) {
    CAPTURE(sizes);
    auto f = writeTemp("calibration.yaml", head + "link:\n  calibration_packets: " + sizes + "\n");
    const std::string msg = errorOf([&] { loadWorkerSettings(f); });
    CHECK(msg.rfind(f + ":4:", 0) == 0);
    CHECK(msg.find("must be in [1, 4096] packets") != std::string::npos);
  }
  std::string many = "[1";
  for (int i = 0; i < 64; ++i) many += ", 2";
  auto f =
      writeTemp("calibration_many.yaml", head + "link:\n  calibration_packets: " + many + "]\n");
  CHECK(errorOf([&] { loadWorkerSettings(f); }).find("more than 64 sizes") != std::string::npos);
  auto ok = writeTemp("calibration_ok.yaml", head + "link:\n  calibration_packets: [1, 4096]\n");
  CHECK(loadWorkerSettings(ok).link.calibration_packets == std::vector<size_t>{1, 4096});
}

TEST_CASE("endpoints are checked where they are written: tcp://HOST:PORT or ipc://PATH") {
  CHECK(endpointProblem("tcp://127.0.0.1:5555", false).empty());
  CHECK(endpointProblem("tcp://pi-4.local:5555", false).empty());
  CHECK(endpointProblem("tcp://*:5555", true).empty());
  CHECK(endpointProblem("tcp://127.0.0.1:0", true).empty());
  CHECK(endpointProblem("tcp://[::1]:*", true).empty());
  CHECK(endpointProblem("ipc:///run/tern/sock", false).empty());
  CHECK_FALSE(endpointProblem("127.0.0.1:5555", false).empty());  // no scheme
  CHECK_FALSE(endpointProblem("tcp://127.0.0.1", true).empty());  // no port
  CHECK_FALSE(endpointProblem("tcp://:5555", true).empty());      // no host
  CHECK_FALSE(endpointProblem("tcp://h:65536", false).empty());   // port out of range
  CHECK_FALSE(endpointProblem("tcp://h:*", false).empty());       // * only to bind
  CHECK_FALSE(endpointProblem("tcp://h:0", false).empty());       // 0 only to bind
  CHECK_FALSE(endpointProblem("ipc://", false).empty());
  auto f = writeTemp("endpoint.yaml", "min_workers: 1\nbind: 127.0.0.1:5555\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(f);
        }).rfind(f + ":2:7: 'bind' must be tcp://HOST:PORT or ipc://PATH", 0) == 0);
}

TEST_CASE("a simulator file refuses the keys only a daemon uses, at their line") {
  auto f = writeTemp("sim-daemon-keys.yaml", "coordinator:\n  checkpoint: {path: c.ckpt}\n");
  CHECK(errorOf([&] {
          loadSimSettings(f);
        }).rfind(f + ":2:15: 'coordinator.checkpoint' is for tern-coordinator's own file", 0) == 0);
  auto w = writeTemp("sim-worker-keys.yaml", "worker:\n  coordinator: tcp://10.0.0.1:1\n");
  CHECK(errorOf([&] {
          loadSimSettings(w);
        }).rfind(w + ":2:16: 'worker.coordinator' is for tern-worker's own file", 0) == 0);
}

TEST_CASE("a simulated link may set its own downlink rate and burst, and evaluations a time") {
  auto f = writeTemp("sim-downlinks.yaml",
                     "train_data: {format: synthetic, rows: 100, features: 4}\ndownload_rate_mbps: "
                     "8\nlinks:\n  - {rate_mbps: 1, download_rate_mbps: 4}\n"
                     "  - {rate_mbps: 100, burst_bytes: 2896}\nevaluation_seconds: 0.02\n");
  const auto s = loadSimSettings(f);
  REQUIRE(s.links.size() == 2);
  REQUIRE(s.links[0].download_rate_mbps.has_value());
  CHECK(*s.links[0].download_rate_mbps == 4.0);
  CHECK_FALSE(s.links[1].download_rate_mbps.has_value());
  CHECK(s.download_rate_mbps == 8.0);
  CHECK(s.links[0].burst_bytes == 0.0);
  CHECK(s.links[1].burst_bytes == 2896.0);
  CHECK(s.evaluation_seconds == 0.02);
  auto bad = writeTemp("sim-downlink-0.yaml",
                       "train_data: {format: synthetic, rows: 100, features: 4}\nlinks:\n  - "
                       "{download_rate_mbps: 0}\n");
  CHECK(errorOf([&] { loadSimSettings(bad); }).find("'download_rate_mbps' must be") !=
        std::string::npos);
}

TEST_CASE("allocation.bytes_per_coordinate is read and checked, and measured when absent") {
  auto f = writeTemp("bpc.yaml", "security: none\nallocation: {bytes_per_coordinate: 1.1}\n");
  const auto given = loadCoordinatorSettings(f).allocation;
  CHECK(given.budget.bytes_per_coordinate == doctest::Approx(1.1));
  CHECK_FALSE(given.measure_push_bytes);
  const auto absent =
      loadCoordinatorSettings(writeTemp("bpc-none.yaml", "security: none\n")).allocation;
  CHECK(absent.measure_push_bytes);
  CHECK(absent.budget.bytes_per_coordinate == 8.0);
  auto g = writeTemp("bpc0.yaml", "security: none\nallocation: {bytes_per_coordinate: 0}\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(g);
        }).find("'bytes_per_coordinate' must be in [0.125") != std::string::npos);
}

TEST_CASE("data wider than any model, or synthetic data past the generators' budget, is refused") {
  // At the key's line, where the generator used to allocate gigabytes or die of std::bad_alloc.
  auto wide = writeTemp("wide_data.yaml",
                        "data:\n  format: libsvm\n  path: a.svm\n  features: 67108865\n"
                        "security: none\n");
  CHECK(errorOf([&] {
          loadWorkerSettings(wide);
        }).rfind(wide + ":4:13: 'features' must be in [0, 67108864]", 0) == 0);
  // (2^20 rows + 2 class means) x 256 features is 512 floats past 2^28; 2 rows fewer fit.
  auto dense = writeTemp("dense_budget.yaml",
                         "data:\n  format: synthetic\n  rows: 1048576\n  features: 256\n"
                         "  classes: 2\nsecurity: none\n");
  CHECK(errorOf([&] { loadWorkerSettings(dense); }) ==
        dense + ":3:9: synthetic data of 1048576 'rows' and 2 class means of 256 'features' is " +
            "more than 268435456 values (1 GiB of floats)");
  auto fits = writeTemp("dense_fits.yaml",
                        "data:\n  format: synthetic\n  rows: 1048574\n  features: 256\n"
                        "  classes: 2\nsecurity: none\n");
  CHECK(loadWorkerSettings(fits).data.rows == 1048574);
  auto sparse_wide = writeTemp("sparse_wide.yaml",
                               "data:\n  format: synthetic_sparse\n  rows: 10\n"
                               "  features: 16777217\nsecurity: none\n");
  CHECK(errorOf([&] { loadWorkerSettings(sparse_wide); }) ==
        sparse_wide + ":4:13: 'features' of synthetic_sparse data must be at most 16777216 " +
            "(the generator keeps ~70 bytes a feature)");
  auto sparse_rows = writeTemp("sparse_rows.yaml",
                               "data:\n  format: synthetic_sparse\n  rows: 268435456\n"
                               "  features: 1000\n  nnz_per_row: 2\nsecurity: none\n");
  CHECK(errorOf([&] { loadWorkerSettings(sparse_rows); }) ==
        sparse_rows + ":3:9: synthetic_sparse data of 268435456 'rows' of 2 'nnz_per_row' is " +
            "more than 268435456 values (1 GiB of floats)");
}

TEST_CASE("a target accuracy without test data: the workers' evaluations, or refused in the sim") {
  // The coordinator daemon checks it at the workers' federated evaluations (docs/python.md).
  auto f = writeTemp("target.yaml", "security: none\nmodel: {features: 4}\ntarget_accuracy: 0.9\n");
  CHECK(loadCoordinatorSettings(f).target_accuracy == doctest::Approx(0.9));
  auto off = writeTemp("target-off.yaml", "security: none\ntarget_accuracy: 0\n");
  CHECK(loadCoordinatorSettings(off).target_accuracy == 0.0);
  auto tested =
      writeTemp("target-test.yaml",
                "security: none\ntarget_accuracy: 0.9\ntest_data: {format: synthetic, rows: 10, "
                "features: 4}\n");
  CHECK(loadCoordinatorSettings(tested).target_accuracy == doctest::Approx(0.9));
  auto sim = writeTemp("target-sim.yaml",
                       "train_data: {format: synthetic, rows: 10, features: 3}\n"
                       "coordinator:\n  target_accuracy: 0.5\n");
  CHECK(errorOf([&] { loadSimSettings(sim); }).rfind(sim + ":3:20: 'target_accuracy' is", 0) == 0);
}

TEST_CASE("link-seconds allocation keys under a method other than cost-aware are refused") {
  for (const std::string key : {"seconds_per_round: 0.06", "deadline_seconds: 1",
                                "round_overhead_seconds: 0.3", "whole_packets: true"}) {
    CAPTURE(key);
    auto f = writeTemp("alloc-method.yaml",
                       "security: none\nallocation:\n  method: dagc-r\n  " + key + "\n");
    CHECK(errorOf([&] { loadCoordinatorSettings(f); }) ==
          f + ":4:" + std::to_string(key.find(':') + 5) + ": 'allocation." +
              key.substr(0, key.find(':')) + "' is read by method cost-aware only, not by dagc-r");
    // Whole packets are priced in link seconds: cost-aware needs its seconds budget with them.
    const std::string budget = key.starts_with("whole") ? "  seconds_per_round: 0.06\n" : "";
    auto ok =
        writeTemp("alloc-cost-aware.yaml",
                  "security: none\nallocation:\n  method: cost-aware\n  " + key + "\n" + budget);
    CHECK_NOTHROW(loadCoordinatorSettings(ok));
    // Set to 0 (false), the key is off: nothing for another method to ignore.
    const std::string off =
        key.substr(0, key.find(':')) + (key.starts_with("whole") ? ": false" : ": 0");
    auto zero = writeTemp("alloc-off.yaml",
                          "security: none\nallocation:\n  method: dagc-r\n  " + off + "\n");
    CHECK_NOTHROW(loadCoordinatorSettings(zero));
  }
  // The method's default is cost-aware, which reads them.
  auto f = writeTemp("alloc-default.yaml", "security: none\nallocation: {deadline_seconds: 2}\n");
  CHECK_NOTHROW(loadCoordinatorSettings(f));
  auto u = writeTemp("alloc-uniform.yaml",
                     "security: none\nallocation: {method: uniform, deadline_seconds: 2}\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(u); }).find("not by uniform") != std::string::npos);
}

TEST_CASE("a data-source key the chosen format does not read is refused at its line") {
  struct Case {
    std::string data, error;
  };
  for (const Case& c : std::vector<Case>{
           {"{format: idx, images: i.gz, labels: l.gz, rows: 100}",
            ":1:55: 'rows' is not read by format idx (it reads 'images', 'labels')"},
           {"{format: idx, images: i.gz, labels: l.gz, path: d.csv}",
            ":1:55: 'path' is not read by format idx"},
           {"{format: idx, images: i.gz, labels: l.gz, features: 784}",
            ":1:59: 'features' is not read by format idx"},
           {"{format: idx, images: i.gz, labels: l.gz, test_fraction: 0.1}",
            ":1:64: 'test_fraction' is not read by format idx"},
           {"{format: csv, path: d.csv, features: 3}",
            ":1:44: 'features' is not read by format csv (it reads 'path', 'label_column')"},
           {"{format: libsvm, path: d.svm, seed: 3}", ":1:43: 'seed' is not read by format libsvm"},
           {"{format: synthetic, rows: 10, features: 3, images: i.gz}",
            ":1:58: 'images' is not read by format synthetic"},
           {"{format: synthetic, rows: 10, features: 3, nnz_per_row: 2}",
            ":1:63: 'nnz_per_row' is not read by format synthetic"},
           {"{format: synthetic_sparse, rows: 10, features: 30, classes: 4}",
            ":1:67: 'classes' is not read by format synthetic_sparse"},
       }) {
    CAPTURE(c.data);
    auto f = writeTemp("format-keys.yaml", "data: " + c.data + "\nsecurity: none\n");
    const std::string error = errorOf([&] { loadWorkerSettings(f); });
    CHECK(error.substr(0, f.size() + c.error.size()) == f + c.error);
  }
  auto ok = writeTemp("format-keys-ok.yaml",
                      "data: {format: libsvm, path: d.svm, features: 9}\nsecurity: none\n");
  CHECK(loadWorkerSettings(ok).data.features == 9);
}

TEST_CASE("the shipped docker configurations parse") {
  const std::string root = TERN_SOURCE_DIR;
  CHECK_NOTHROW(loadCoordinatorSettings(root + "/deploy/docker/coordinator.yaml"));
  CHECK_NOTHROW(loadWorkerSettings(root + "/deploy/docker/worker.yaml"));
}

TEST_CASE("an HTTP endpoint is checked where it is written: HOST:PORT with a port up to 65535") {
  CHECK(httpBindProblem("127.0.0.1:0").empty());
  CHECK(httpBindProblem(":9464").empty());
  CHECK(httpBindProblem("[::1]:65535").empty());
  CHECK(httpBindProblem("127.0.0.1:99999") ==
        "must be HOST:PORT, [IPV6]:PORT or :PORT (PORT 0 for any free port), got "
        "'127.0.0.1:99999': port must be 0..65535");
  CHECK(httpBindProblem("nonsense").find("expected HOST:PORT") != std::string::npos);
  CHECK_FALSE(httpBindProblem("host:").empty());
  CHECK_FALSE(httpBindProblem("::1:80").empty());
  auto f = writeTemp("http-port.yaml", "security: none\nhttp: {bind: \"127.0.0.1:99999\"}\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(f); }) ==
        f + ":2:14: 'http.bind' " + httpBindProblem("127.0.0.1:99999"));
}

TEST_CASE("a coordinator without test data needs model.features, said where the model is") {
  auto none = writeTemp("features-none.yaml", "security: none\n");
  CHECK(errorOf([&] { requireModelFeatures(loadCoordinatorSettings(none)); }) ==
        none + ":1:1: 'model.features' must be set (> 0): there is no 'test_data' to take the " +
            "model's input width from");
  auto section = writeTemp("features-section.yaml", "security: none\nmodel:\n  kind: softmax\n");
  CHECK(errorOf([&] {
          requireModelFeatures(loadCoordinatorSettings(section));
        }).rfind(section + ":3:3: 'model.features' must be set", 0) == 0);
  auto zero = writeTemp("features-zero.yaml", "security: none\nmodel: {features: 0}\n");
  CHECK(errorOf([&] {
          requireModelFeatures(loadCoordinatorSettings(zero));
        }).rfind(zero + ":2:19: 'model.features' must be set", 0) == 0);
  auto given = writeTemp("features-given.yaml", "security: none\nmodel: {features: 4}\n");
  CHECK_NOTHROW(requireModelFeatures(loadCoordinatorSettings(given)));
  auto tested =
      writeTemp("features-test.yaml",
                "security: none\ntest_data: {format: synthetic, rows: 10, features: 4}\n");
  CHECK_NOTHROW(requireModelFeatures(loadCoordinatorSettings(tested)));
}

TEST_CASE("a directory given as the configuration file is said to be one") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK(errorOf([&] { loadCoordinatorSettings(dir); }) ==
        dir + ":1:1: is a directory, not a configuration file");
}

TEST_CASE("tern-sim's --workers past the file's count moves the coordinator's limits with it") {
  // The file says 4 workers; 1001 simulated workers must all be awaited and none refused.
  const std::string root = TERN_SOURCE_DIR;
  SimSettings s = loadSimSettings(root + "/deploy/config/sim-quick.yaml");
  REQUIRE(s.coordinator.max_workers < 1001);
  setSimWorkers(s, 1001);
  CHECK(s.workers == 1001);
  CHECK(s.coordinator.min_workers == 1001);
  CHECK(s.coordinator.max_workers == 1001);
  const uint32_t most = s.coordinator.max_workers;
  setSimWorkers(s, 2);
  CHECK(s.coordinator.min_workers == 2);
  CHECK(s.coordinator.max_workers == most);  // never lowered below what the file allows
}

TEST_CASE("a coordinator's max_message_bytes is auto unless given: what the densest push needs") {
  const auto unset = loadCoordinatorSettings(writeTemp("mmb-unset.yaml", "security: none\n"));
  CHECK_FALSE(unset.max_message_bytes_given);
  const auto named = loadCoordinatorSettings(
      writeTemp("mmb-auto.yaml", "max_message_bytes: auto\nsecurity: none\n"));
  CHECK_FALSE(named.max_message_bytes_given);
  const auto given = loadCoordinatorSettings(
      writeTemp("mmb-given.yaml", "max_message_bytes: 4096\nsecurity: none\n"));
  CHECK(given.max_message_bytes_given);
  CHECK(given.max_message_bytes == 4096);
  CHECK_FALSE(errorOf([&] {
                loadCoordinatorSettings(
                    writeTemp("mmb-small.yaml", "max_message_bytes: 10\nsecurity: none\n"));
              }).empty());
  // 8 bytes a coordinate (a sparse code of all of them) and 64 KiB, never under the 1 MiB an
  // envelope frame may take.
  CHECK(autoMaxMessageBytes(7850) == 1u << 20);
  CHECK(autoMaxMessageBytes(1000000) == 8000000u + (64u << 10));
  CHECK(autoMaxMessageBytes(size_t(1) << 40) == size_t(1) << 32);
}

TEST_CASE("an unknown key that is a slip of a known one is said with the key meant") {
  auto f = writeTemp("slip.yaml",
                     "security: none\ndata: {format: synthetic, rows: 10, features: 3}\n"
                     "coordinater: tcp://127.0.0.1:5555\n");
  CHECK(errorOf([&] { loadWorkerSettings(f); }) ==
        f + ":3:1: unknown key 'coordinater' (did you mean 'coordinator'?)");
  auto nested =
      writeTemp("slip-nested.yaml", "security: none\noptimizer: {lr: 0.1, momentun: 0.5}\n");
  CHECK(errorOf([&] {
          loadCoordinatorSettings(nested);
        }).ends_with("unknown key 'optimizer.momentun' (did you mean 'optimizer.momentum'?)"));
  // Nothing near: no guess.
  auto far = writeTemp("far.yaml", "security: none\nflux_capacitor: 1\n");
  CHECK(errorOf([&] { loadCoordinatorSettings(far); }).ends_with("unknown key 'flux_capacitor'"));
}
