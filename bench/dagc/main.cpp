// tern-bench-dagc: reproduces DAGC (docs/dagc.md) in the simulator, with the real
// coordinator and worker cores. Softmax regression on Fashion-MNIST, Dirichlet(0.5) label skew,
// geometric volume skew; uniform, dagc-r, dagc-opt, cost-aware (top-k) and uniform-ht, dagc-a
// (hard threshold) under one traffic budget; rounds and simulated seconds to a target test
// accuracy. Prints a summary, writes the per-run CSV and a PNG.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

#include "experiment.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "threshold_calibration.hpp"

using namespace tern::bench::dagc;
namespace config = tern::config;

namespace {

struct Options {
  std::string csv = "dagc.csv";
  std::string plot = "dagc.png";
  std::string curves;
  size_t seeds = 3;
  uint64_t rounds = 0;  // 0 = the per-budget defaults below
  // Limits sized from pilot runs, where the slowest methods needed up to about 850 rounds at
  // 0.1% and 400 at 1%: room for slower seeds while a full run stays within about 25 minutes on
  // two shared cores (runs end at the target, so the limits cost only on a miss).
  uint64_t rounds_constrained = 1500;  // mean ratio 0.1%
  uint64_t rounds_relaxed = 1000;      // mean ratio 1%
  bool quick = false;
  bool full = false;
  bool report_only = false;
  std::vector<std::string> merge;  // earlier CSVs whose rows join the report unchanged
  // The default is the headline subset (SR = 1000 and the heterogeneous links, both budgets);
  // --full adds SR 10 and 100 and the motivation setup.
  std::vector<std::string> setups = {"skew", "hetero"};
  std::vector<std::string> methods;
  std::vector<double> srs = {1000};
  std::vector<double> ratios = {0.01, 0.001};
  uint64_t eval_every = 5;
  size_t jobs = 2;
  Training training;
  DataFiles data;
  CalibrationOptions calibration;
  double lambda_bar = 0.0;  // > 0: use it for every threshold run instead of calibrating
};

double targetFor(double mean_ratio) { return mean_ratio < 0.005 ? 0.75 : 0.80; }

uint64_t roundsFor(const Options& o, double mean_ratio) {
  if (o.rounds) return o.rounds;
  return mean_ratio < 0.005 ? o.rounds_constrained : o.rounds_relaxed;
}

bool wanted(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Equal links everywhere: the volume-skew grid and the motivation setup count rounds only.
std::vector<config::SimLink> equalLinks() { return {config::SimLink{100.0, 1.0, 0.01, {}, 0.0}}; }

// Half the workers at 1 Mbit/s, half at 20 Mbit/s, alternating by worker index so that slow and
// fast links each hold large and small shares; worker 0, the largest, is on a slow link.
// 5 ms one-way latency, 10 ms compute per round.
std::vector<config::SimLink> mixedLinks(uint32_t workers) {
  std::vector<config::SimLink> links;
  for (uint32_t i = 0; i < workers; ++i) {
    links.push_back(config::SimLink{i % 2 == 0 ? 1.0 : 20.0, 5.0, 0.01, {}, 0.0});
  }
  return links;
}

RunSpec baseRun(const Options& o, const std::string& setup, uint32_t workers, double sr,
                double ratio, const std::string& method, uint64_t seed) {
  RunSpec r;
  r.setup = setup;
  r.workers = workers;
  r.sr = sr;
  r.mean_ratio = ratio;
  r.method = methodByLabel(method);
  r.seed = seed;
  r.target = targetFor(ratio);
  r.max_rounds = roundsFor(o, ratio);
  r.eval_every = o.eval_every;
  r.links = equalLinks();
  return r;
}

std::vector<RunSpec> plan(const Options& o) {
  std::vector<RunSpec> runs;
  // Without link measurements (equal links) cost-aware has no prices and is dagc-opt by
  // construction (common/allocation: a volume budget prices every coordinate alike), so it is
  // run only where the links differ.
  auto blind = [&](const std::string& m) { return m.rfind("cost-aware", 0) != 0; };
  if (wanted(o.setups, "skew")) {
    for (double sr : o.srs)
      for (double ratio : o.ratios)
        for (const auto& m : o.methods)
          if (blind(m))
            for (uint64_t seed = 1; seed <= o.seeds; ++seed)
              runs.push_back(baseRun(o, "skew", 10, sr, ratio, m, seed));
  }
  if (wanted(o.setups, "motivation")) {
    // The paper's motivation study has 11 workers with one holding half the data. The simulator
    // splits data in geometric volumes only, so the nearest split is used: shares halving from
    // worker to worker (SR = 2^10), which gives worker 0 half the data.
    for (const auto& m : o.methods)
      if (blind(m))
        for (uint64_t seed = 1; seed <= o.seeds; ++seed)
          runs.push_back(baseRun(o, "motivation", 11, 1024, 0.001, m, seed));
  }
  if (wanted(o.setups, "hetero")) {
    // The same budget for every method: the same upload volume per round (sum of caps =
    // n * mean_ratio * d). Cost-blind methods split it by data share alone; cost-aware splits
    // the same volume with the fitted links in view, under an upload deadline it picks itself.
    for (double ratio : o.ratios)
      for (const auto& m : o.methods)
        for (uint64_t seed = 1; seed <= o.seeds; ++seed) {
          RunSpec r = baseRun(o, "hetero", 10, 1000, ratio, m, seed);
          r.links = mixedLinks(r.workers);
          r.download_rate_mbps = 20.0;
          // Every method pays for the probes alike; only cost-aware uses the fitted links.
          r.measure_links = true;
          if (!blind(m)) r.round_overhead_seconds = roundOverheadSeconds(r);
          if (m == "cost-aware-packets") {
            r.seconds_per_round = uniformLinkSeconds(r);
            r.whole_packets = true;
          }
          runs.push_back(r);
        }
  }
  return runs;
}

// Runs fn(0..n-1) on `jobs` threads; every simulator owns its state, so runs are independent.
void parallelFor(size_t n, size_t jobs, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  std::mutex error_mutex;
  std::exception_ptr error;
  for (size_t t = 0; t < std::max<size_t>(1, std::min(jobs, n)); ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

// Keyed by setup too, so that a condition's lambda_bar does not depend on which other setups
// share the invocation: every setup is calibrated on its own runs' settings.
using RefKey = std::tuple<std::string, uint32_t, double, double>;  // setup, workers, sr, ratio
using CalKey = std::tuple<std::string, uint32_t, double, double, std::string>;

RefKey refKey(const RunSpec& r) { return {r.setup, r.workers, r.sr, r.mean_ratio}; }
CalKey calKey(const RunSpec& r) { return {r.setup, r.workers, r.sr, r.mean_ratio, r.method.label}; }

// lambda_bar for every threshold method in the plan, matched to top-k uniform's traffic.
std::map<CalKey, double> calibrate(const std::vector<RunSpec>& runs, const Options& o) {
  std::map<CalKey, RunSpec> todo;
  std::map<RefKey, double> reference;
  for (const auto& r : runs) {
    if (!r.method.threshold()) continue;
    todo.emplace(calKey(r), r);
    reference.emplace(refKey(r), 0.0);
  }
  if (todo.empty()) return {};
  if (o.lambda_bar > 0) {
    std::map<CalKey, double> fixed;
    for (const auto& [k, r] : todo) fixed[k] = o.lambda_bar;
    return fixed;
  }
  std::cout << "Calibrating lambda_bar on seed " << o.calibration.seed << " ("
            << o.calibration.rounds << "-round pilots) ..." << std::endl;
  std::vector<RefKey> ref_keys;
  for (const auto& [k, v] : reference) ref_keys.push_back(k);
  std::vector<double> ref_bytes(ref_keys.size());
  std::vector<RunSpec> ref_runs;
  for (const auto& k : ref_keys) {
    for (const auto& [ck, r] : todo) {
      if (refKey(r) == k) {
        ref_runs.push_back(r);
        break;
      }
    }
  }
  parallelFor(ref_keys.size(), o.jobs, [&](size_t i) {
    ref_bytes[i] = referenceBytesPerRound(ref_runs[i], o.training, o.data, o.calibration);
  });
  for (size_t i = 0; i < ref_keys.size(); ++i) reference[ref_keys[i]] = ref_bytes[i];

  std::vector<std::pair<CalKey, RunSpec>> items(todo.begin(), todo.end());
  std::vector<Calibration> found(items.size());
  parallelFor(items.size(), o.jobs, [&](size_t i) {
    const RunSpec& r = items[i].second;
    found[i] = calibrateThreshold(r, reference.at(refKey(r)), o.training, o.data, o.calibration);
  });
  std::map<CalKey, double> out;
  std::cout << std::left << std::setw(4) << "n" << std::right << std::setw(7) << "SR"
            << std::setw(8) << "ratio" << std::setw(12) << "method" << std::setw(12) << "lambda_bar"
            << std::setw(10) << "B/round" << std::setw(15) << "top-k B/round" << std::setw(8)
            << "pilots" << '\n';
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& [setup, w, sr, ratio, label] = items[i].first;
    const Calibration& c = found[i];
    out[items[i].first] = c.lambda_bar;
    std::ostringstream row;
    row << std::left << std::setw(4) << w << std::right << std::setw(7) << sr << std::setw(7)
        << ratio * 100 << '%' << std::setw(12) << label << std::setw(12) << std::setprecision(4)
        << c.lambda_bar << std::fixed << std::setprecision(0) << std::setw(10) << c.bytes_per_round
        << std::setw(15) << c.reference_bytes_per_round << std::setw(8) << c.pilots << '\n';
    std::cout << row.str();
  }
  return out;
}

std::string describe(const RunSpec& r) {
  std::ostringstream o;
  o << r.setup << " n=" << r.workers << " SR=" << r.sr << " ratio=" << r.mean_ratio * 100 << "% "
    << r.method.label << " seed " << r.seed;
  return o.str();
}

// Each worker's final cap, largest share first: what the allocator ended up giving whom; with
// measured links also the link fits a_i, b_i the coordinator last saw (ms, 0 = not fitted).
std::string caps(const RunResult& r) {
  struct Row {
    double share;
    uint32_t cap;
    double a, b;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < r.final_caps.size(); ++i) {
    rows.push_back({r.final_shares[i], r.final_caps[i], r.final_link_a[i], r.final_link_b[i]});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& x, const Row& y) { return x.share > y.share; });
  std::ostringstream o;
  for (const auto& row : rows) o << ' ' << row.cap;
  if (r.spec.measure_links) {
    o << "; fitted a ms" << std::setprecision(2);
    for (const auto& row : rows) o << ' ' << row.a * 1e3;
    o << "; b ms/packet";
    for (const auto& row : rows) o << ' ' << row.b * 1e3;
  }
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"DAGC reproduction: data-aware compression caps in the tern simulator"};
  Options o;
  for (const auto& m : allMethods()) o.methods.push_back(m.label);
  app.add_option("--csv", o.csv, "per-run results (CSV)");
  app.add_option("--plot", o.plot, "PNG plot (needs gnuplot)");
  app.add_option("--curves", o.curves, "every evaluated point of every run (CSV)");
  app.add_option("--seeds", o.seeds, "seeds per condition (1..N)")->check(CLI::Range(1, 100));
  app.add_option("--rounds", o.rounds,
                 "rounds limit for every run (default: 1500 at 0.1%, 1000 at 1%)");
  app.add_flag("--quick", o.quick, "smoke run: SR=1000, 0.1%, one seed, short runs");
  app.add_flag("--full", o.full,
               "every condition of the study: SR 10, 100, 1000, the motivation setup and the "
               "heterogeneous links (default: SR 1000 and the heterogeneous links)");
  app.add_option("--merge", o.merge,
                 "CSV written by an earlier run: its rows join the summary, CSV and plot as they "
                 "are (conditions run now replace theirs)");
  app.add_flag("--report-only", o.report_only,
               "run nothing: write the summary, CSV and plot of the --merge rows alone");
  auto* setups = app.add_option("--setup", o.setups, "skew, motivation, hetero")
                     ->delimiter(',')
                     ->check(CLI::IsMember({"skew", "motivation", "hetero"}));
  std::vector<std::string> labels;
  for (const auto& m : allMethods()) labels.push_back(m.label);
  app.add_option("--method", o.methods, "methods to run (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(labels));
  auto* srs = app.add_option("--sr", o.srs, "volume skews of the skew grid")->delimiter(',');
  auto* ratios =
      app.add_option("--ratio", o.ratios, "mean ratios of the skew grid")->delimiter(',');
  app.add_option("--eval-every", o.eval_every, "rounds between test evaluations")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--jobs", o.jobs, "simulations run at once")->check(CLI::Range(1, 64));
  app.add_option("--data", o.data.dir, "directory of the Fashion-MNIST IDX files");
  app.add_option("--calibration-rounds", o.calibration.rounds, "length of a lambda_bar pilot");
  app.add_option("--lambda-bar", o.lambda_bar,
                 "threshold for uniform-ht and dagc-a (default: calibrated to top-k traffic)");
  CLI11_PARSE(app, argc, argv);

  if (o.full) {
    if (!srs->count()) o.srs = {10, 100, 1000};
    if (!setups->count()) o.setups = {"skew", "motivation", "hetero"};
  }
  if (o.quick) {
    if (!srs->count()) o.srs = {1000};
    if (!ratios->count()) o.ratios = {0.001};
    if (!setups->count()) o.setups = {"skew", "hetero"};
    if (!app.count("--seeds")) o.seeds = 1;
    if (!o.rounds) o.rounds = 200;
    if (!app.count("--calibration-rounds")) o.calibration.rounds = 100;
  }
  spdlog::set_level(spdlog::level::err);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  try {
    auto runs = o.report_only ? std::vector<RunSpec>{} : plan(o);
    std::vector<RunResult> merged;
    for (const auto& file : o.merge) {
      for (auto& r : readCsv(file, [&](double ratio) { return roundsFor(o, ratio); })) {
        const bool rerun = std::any_of(runs.begin(), runs.end(), [&](const RunSpec& s) {
          return s.setup == r.spec.setup && s.sr == r.spec.sr &&
                 s.mean_ratio == r.spec.mean_ratio && s.method.label == r.spec.method.label &&
                 s.seed == r.spec.seed;
        });
        if (!rerun) merged.push_back(std::move(r));
      }
    }
    if (o.report_only && merged.empty()) {
      std::cerr << "tern-bench-dagc: --report-only needs rows from --merge\n";
      return 2;
    }
    if (runs.empty() && !o.report_only) {
      std::cerr << "tern-bench-dagc: nothing to run with these filters\n";
      return 2;
    }
    std::cout << "softmax regression on Fashion-MNIST, d = " << modelDimension() << ", Dirichlet("
              << o.training.dirichlet_alpha << ") labels, lr " << o.training.lr << ", batch "
              << o.training.batch_size << ", error feedback, eval every " << o.eval_every
              << " rounds; " << runs.size() << " runs on " << o.jobs << " threads\n";
    for (const auto& r : runs) {
      if (r.round_overhead_seconds > 0) {
        std::cout << "hetero: every method gets the same upload volume per round; cost-aware "
                     "picks its upload deadline for a round overhead of "
                  << r.round_overhead_seconds * 1e3 << " ms besides the slowest upload\n";
        std::cout << "hetero: cost-aware-packets gets the link seconds a uniform plan spends "
                     "instead ("
                  << uniformLinkSeconds(r) * 1e3
                  << " ms per round at this ratio), priced in whole packets\n";
        break;
      }
    }
    if (!merged.empty()) std::cout << merged.size() << " runs merged from earlier CSVs\n";
    const auto lambdas = calibrate(runs, o);
    for (auto& r : runs) {
      if (r.method.threshold()) r.mean_threshold = lambdas.at(calKey(r));
    }
    std::cout << "calibration done after " << int(elapsed()) << " s" << std::endl;

    std::vector<RunResult> results(runs.size());
    std::mutex print;
    std::atomic<size_t> done{0};
    parallelFor(runs.size(), o.jobs, [&](size_t i) {
      results[i] = runOne(runs[i], o.training, o.data);
      const auto& r = results[i];
      std::lock_guard lock(print);
      std::cerr << '[' << ++done << '/' << runs.size() << "] " << describe(runs[i]) << ": "
                << (r.rounds_to_target ? std::to_string(*r.rounds_to_target) + " rounds"
                                       : "target missed in " + std::to_string(r.rounds_run))
                << ", acc " << std::setprecision(4) << r.final_accuracy << ", "
                << std::setprecision(3) << r.wall_seconds << " s"
                << (r.replica_mismatches ? ", REPLICAS DIFFER" : "") << "; final caps" << caps(r)
                << std::endl;
    });

    // Merged rows first, in their order; the runs of this invocation after them.
    results.insert(results.begin(), std::make_move_iterator(merged.begin()),
                   std::make_move_iterator(merged.end()));
    writeCsv(o.csv, results);
    if (!o.curves.empty()) writeCurves(o.curves, results);
    std::cout << '\n';
    printSummary(std::cout, results);
    const bool plotted = writePlot(o.plot, results, std::cout);
    std::cout << "\nwrote " << o.csv << (plotted ? " and " + o.plot : "") << " in "
              << int(elapsed()) << " s\n";
    uint64_t mismatches = 0;
    for (const auto& r : results) mismatches += r.replica_mismatches;
    if (mismatches) {
      std::cout << "warning: " << mismatches
                << " worker replicas differed from the coordinator's model at the end of a run\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "tern-bench-dagc: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
