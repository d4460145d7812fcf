// tern-bench-transport: how close a tern round is to the wire. For each case, tern's round (the
// built tern-coordinator and tern-loadgen on loopback, see tern_round.hpp) and a raw libzmq
// ROUTER/DEALER program moving the same bytes per worker in the same pattern (raw_round.hpp) run
// as a pair; pairs are interleaved, the order within a pair alternating. One CSV row per case and
// pair; the median of the pairs per case on stdout. docs/performance.md has the results.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "bench/transport/raw_round.hpp"
#include "bench/transport/tern_round.hpp"

using namespace tern::bench;

namespace {

constexpr const char* kMillion = "{kind: mlp, hidden: 1270, classes: 10}";  // 1,008,970 params
constexpr const char* kQuickstart = "{kind: softmax, classes: 10}";         // 7,850 params

std::vector<TernCase> allCases(size_t workers) {
  return {{"identity-1e6", kMillion, "identity", 1.0, workers},
          {"topk1-1e6", kMillion, "topk", 0.01, workers},
          {"identity-quickstart", kQuickstart, "identity", 1.0, workers},
          {"topk1-quickstart", kQuickstart, "topk", 0.01, workers}};
}

struct Pair {
  TernResult tern;
  double raw_ms = 0;
};

// tern first in even pairs, the raw program first in odd ones (with the bytes of the case's
// first tern run: a case moves the same bytes every round).
Pair runPair(const TernSetup& s, const TernCase& c, int index, const TernResult* first) {
  Pair p;
  RawPattern raw{c.workers, 0, 0, s.rounds, s.warmup};
  auto runRaw = [&](const TernResult& bytes) {
    raw.down_bytes = bytes.down_bytes;
    raw.up_bytes = bytes.up_bytes;
    p.raw_ms = rawRoundMs(raw);
  };
  if (index % 2 == 1 && first) {
    runRaw(*first);
    p.tern = ternRound(s, c);
  } else {
    p.tern = ternRound(s, c);
    runRaw(p.tern);
  }
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

std::string selfDir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern-bench-transport: tern's round against raw libzmq moving the same bytes"};
  std::string csv_path;
  std::vector<std::string> only;
  TernSetup s;
  s.bin_dir = selfDir();
  s.data_dir = "/usr/share/datasets/fashion-mnist";
  int pairs = 5;
  size_t workers = 4;
  bool quick = false;
  app.add_option("--csv", csv_path, "write one row per case and pair here")->required();
  app.add_option("--pairs", pairs, "interleaved tern/raw pairs per case (default 5)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--rounds", s.rounds, "timed rounds per run (default 30)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--warmup", s.warmup, "untimed rounds first (default 10)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--workers", workers, "workers (default 4)")->check(CLI::Range(1, 1000));
  app.add_option("--case", only,
                 "run only these cases (identity-1e6, topk1-1e6, "
                 "identity-quickstart, topk1-quickstart)");
  app.add_option("--bin", s.bin_dir, "directory of tern-coordinator and tern-loadgen");
  app.add_option("--data", s.data_dir, "Fashion-MNIST's directory");
  app.add_flag("--quick", quick, "one pair of 3 + 5 rounds per case (a smoke run)");
  CLI11_PARSE(app, argc, argv);
  if (quick) pairs = 1, s.rounds = 5, s.warmup = 3;
  // The reference gets the best case: glibc keeps freed blocks for reuse instead of mapping
  // fresh pages for every large message. tern's daemons run untuned in their own processes.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  std::vector<TernCase> cases;
  for (const auto& c : allCases(workers))
    if (only.empty() || std::count(only.begin(), only.end(), c.name)) cases.push_back(c);
  if (cases.empty()) return std::cerr << "tern-bench-transport: no such case\n", 2;
  std::ofstream csv(csv_path);
  csv << "case,d,compression,workers,tern_round_ms,raw_round_ms,ratio,"
         "coordinator_faults_per_round\n";
  std::map<std::string, std::vector<Pair>> results;
  try {
    for (int i = 0; i < pairs; ++i) {
      for (const auto& c : cases) {
        auto& done = results[c.name];
        Pair p = runPair(s, c, i, done.empty() ? nullptr : &done.front().tern);
        done.push_back(p);
        csv << c.name << ',' << p.tern.params << ',' << c.compression << ',' << c.workers << ','
            << p.tern.round_ms << ',' << p.raw_ms << ',' << p.tern.round_ms / p.raw_ms << ','
            << p.tern.faults_per_round << '\n'
            << std::flush;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "tern-bench-transport: " << e.what() << '\n';
    return 1;
  }
  for (const auto& c : cases) {
    std::vector<double> tern, raw, ratio, faults;
    for (const auto& p : results[c.name]) {
      tern.push_back(p.tern.round_ms);
      raw.push_back(p.raw_ms);
      ratio.push_back(p.tern.round_ms / p.raw_ms);
      faults.push_back(p.tern.faults_per_round);
    }
    const TernResult& t = results[c.name].front().tern;
    double pages = double(t.params) * 4 / 4096;
    std::cout << "transport: case=" << c.name << " d=" << t.params << " pairs=" << tern.size()
              << " down_bytes=" << t.down_bytes << " up_bytes=" << t.up_bytes
              << " tern_round_ms=" << median(tern) << " raw_round_ms=" << median(raw)
              << " ratio=" << median(ratio) << " faults_per_round=" << median(faults)
              << " faults_pct_of_model_pages=" << 100 * median(faults) / pages << '\n';
  }
  return 0;
}
