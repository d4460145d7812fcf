// tern-bench-cat: reproduces CAT (docs/cat.md) in process. L2 logistic regression on
// Fashion-MNIST (binary), an RCV1-like synthetic problem and any LIBSVM file; 1 and 4 workers;
// full GD, a fixed-T grid, dynamic S+Q and CAT with top-T, S+Q and stochastic sparsification
// under the payload and the packet cost models, without memory (the paper's setting) and with a
// residual (the daemons'), where CAT runs both the paper's criterion on g + e and the daemons' on
// the fresh gradient. Prints tables, writes CSV and a PNG. The default grid finishes in minutes;
// --full runs the complete one.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "problems.hpp"
#include "report.hpp"
#include "training.hpp"

using namespace tern::bench::cat;

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Powers of `factor` from `first` while below d: the static-tuning grid.
std::vector<uint32_t> geometricGrid(uint32_t first, uint32_t factor, uint32_t dim) {
  std::vector<uint32_t> grid;
  for (uint64_t t = first; t < dim; t *= factor) grid.push_back(static_cast<uint32_t>(t));
  return grid;
}

// The --error-feedback settings, in the order a run takes them.
const std::vector<std::string> kSettings = {"off", "on"};

struct Options {
  std::string csv = "cat.csv";
  std::string plot = "cat.png";
  std::string libsvm;
  std::string fmnist_dir = "/usr/share/datasets/fashion-mnist";
  // A seeded 1000-row subset keeps the default run within minutes on two shared cores while
  // every target stays reachable (lambda = 1/n: fewer rows, better conditioned); --full uses 5000.
  size_t fmnist_rows = 1000;
  std::vector<std::string> problems = {"fmnist"};
  std::vector<size_t> workers = {1, 4};
  size_t max_rounds = 12000;
  bool full = false;
  // own: each worker's vector is applied with the step its tuner reported, the one its
  // improvement assumes; min: all with the smallest reported step (equal for top-T and S+Q:
  // 1/L).
  std::string step_rule = "own";
  double dirichlet_alpha = 0.0;
  double volume_ratio = 1.0;
  size_t batch = 0;
  std::vector<uint32_t> grid;
  uint32_t grid_first = 8, grid_factor = 8;
  std::vector<std::string> fixed_compressors = {"topk", "sq", "stochastic"};
  uint32_t hybrid_every = 200;
  double hybrid_drift = 1.25;
  // off: the paper's setting (compressed GD without memory); on: every biased compressor (top-T,
  // S+Q) keeps a residual, fixed, dynamic and CAT alike (CAT with both criteria).
  std::vector<std::string> error_feedback = kSettings;
  size_t threads = 2;
  uint64_t seed = 1;
  size_t fstar_rounds = 50000;
  double latency_ms = 5.0, rate_mbps = 8.0;
  size_t packet_bytes = 1448;
  std::vector<std::string> only;  // run only methods whose label starts with one of these
  std::string trace_dir;          // when set, every run's f(x_k) and totals go there as CSV
  std::vector<double> targets = {1e-2, 1e-3, 1e-4};
};

// The problem, the workers' counts and the output.
void addRunOptions(CLI::App& app, Options& o) {
  app.add_option("--csv", o.csv, "CSV output");
  app.add_option("--plot", o.plot, "PNG plot output (needs gnuplot)");
  app.add_option("--libsvm", o.libsvm, "also run on this LIBSVM file (e.g. RCV1)");
  app.add_option("--fmnist-dir", o.fmnist_dir, "Fashion-MNIST IDX files");
  app.add_option("--fmnist-rows", o.fmnist_rows, "seeded subset of the training set (0 = all)");
  app.add_option("--problems", o.problems, "fmnist, synthetic (libsvm is added by --libsvm)");
  app.add_option("--workers", o.workers, "worker counts");
  app.add_option("--max-rounds", o.max_rounds, "iteration limit per run");
  app.add_flag("--full", o.full,
               "the complete grid: Fashion-MNIST with 5000 rows and the synthetic problem, "
               "80000 rounds (hours on two cores); explicit options still win");
  app.add_option("--dirichlet-alpha", o.dirichlet_alpha,
                 "label skew of the workers' shards (Dirichlet concentration; 0 = IID labels)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--volume-ratio", o.volume_ratio,
                 "largest worker's share of the rows over the smallest's (1 = equal)")
      ->check(CLI::Range(1.0, 1000.0));
  app.add_option("--threads", o.threads, "runs in parallel");
  app.add_option("--seed", o.seed, "seed for data, partitions and compressors");
  app.add_option("--fstar-rounds", o.fstar_rounds, "accelerated rounds for f*");
  app.add_option("--latency-ms", o.latency_ms, "link latency of the packet model");
  app.add_option("--rate-mbps", o.rate_mbps, "link rate of the packet model");
  app.add_option("--packet-bytes", o.packet_bytes, "P_max of the packet model");
  app.add_option("--only", o.only, "run only the methods whose label starts with one of these");
  app.add_option("--trace-dir", o.trace_dir,
                 "write every run's trajectory as CSV into this folder");
  app.add_option("--targets", o.targets,
                 "relative targets: f - f* <= target * (f0 - f*); a run stops at the smallest");
}

// The methods, the memory and the step.
void addMethodOptions(CLI::App& app, Options& o) {
  app.add_option("--grid", o.grid,
                 "fixed-T grid (default: powers of --grid-factor from --grid-first)");
  app.add_option("--grid-first", o.grid_first, "smallest T of the default grid");
  app.add_option("--grid-factor", o.grid_factor, "ratio between grid points");
  app.add_option("--fixed-compressors", o.fixed_compressors, "compressors of the fixed-T grid");
  app.add_option("--hybrid-every", o.hybrid_every, "S of the hybrid heuristic (1 = skip)");
  app.add_option("--hybrid-drift", o.hybrid_drift,
                 "hybrid: recompute early when ||v||_1^2/||v||_2^2 moves by this factor (0 = off)");
  app.add_option("--error-feedback", o.error_feedback,
                 "settings to run: off (the paper's), on (a residual on top-T and S+Q, as the "
                 "daemons keep; CAT also runs the daemons' criterion on the fresh gradient, "
                 "labelled -fresh), or both; see docs/cat.md")
      ->check(CLI::IsMember(kSettings));
  app.add_option("--step-rule", o.step_rule,
                 "own: each worker's vector scaled by its own step; min: all by the smallest")
      ->check(CLI::IsMember({"own", "min"}));
  app.add_option("--batch", o.batch,
                 "each worker's gradient from this many of its rows, drawn afresh every round "
                 "(0 = all; f and the targets stay the whole objective's)");
}

// Applies --full's defaults and checks what CLI11 cannot; an error message, or none.
std::optional<std::string> settle(const CLI::App& app, Options& o) {
  if (o.full) {
    if (!app.count("--problems")) o.problems = {"fmnist", "synthetic"};
    if (!app.count("--fmnist-rows")) o.fmnist_rows = 5000;
    if (!app.count("--max-rounds")) o.max_rounds = 80000;
  }
  std::sort(o.targets.begin(), o.targets.end(), std::greater<>());
  if (o.targets.empty() || o.targets.back() <= 0.0) return "--targets must be positive";
  if (!std::isfinite(o.dirichlet_alpha) || !std::isfinite(o.volume_ratio))
    return "--dirichlet-alpha and --volume-ratio must be finite";
  if (o.grid_factor < 2 || o.grid_first < 1)
    return "--grid-factor must be >= 2 and --grid-first >= 1";
  return std::nullopt;
}

// Loads every problem and solves for its f*; throws on a problem that cannot be loaded.
std::vector<Problem> loadProblems(const Options& o) {
  std::vector<Problem> problems;
  for (const auto& name : o.problems) {
    const auto t0 = std::chrono::steady_clock::now();
    if (name == "fmnist")
      problems.push_back(fashionMnistBinary(o.fmnist_dir, o.fmnist_rows, o.seed));
    else if (name == "synthetic")
      problems.push_back(rcv1LikeSynthetic(o.seed));
    else
      throw std::invalid_argument("unknown problem '" + name + "'");
    std::cout << "loaded " << problems.back().name << " in " << secondsSince(t0) << " s"
              << std::endl;
  }
  if (!o.libsvm.empty()) problems.push_back(libsvmProblem(o.libsvm));
  for (auto& p : problems) {
    const auto t0 = std::chrono::steady_clock::now();
    // f - f* <= ||grad||^2 / (2 lambda) <= 1e-8 (f0 - f*): ten thousand times below 1e-4.
    solveOptimum(p, o.fstar_rounds, 1e-8);
    const double certified =
        p.fstar_gradient_norm * p.fstar_gradient_norm / (2.0 * p.l2) / (p.f0 - p.fstar);
    std::cout << p.name << ": n = " << p.data.rows() << ", d = " << p.dim
              << " (with bias), L = " << p.L << ", lambda = " << p.l2 << ", f0 = " << p.f0
              << ", f* = " << std::setprecision(12) << p.fstar << std::setprecision(6) << " ("
              << p.fstar_iterations
              << " accelerated rounds, final ||grad|| = " << p.fstar_gradient_norm
              << ", so (f - f*) / (f0 - f*) <= " << certified << " there; " << secondsSince(t0)
              << " s)" << std::endl;
  }
  return problems;
}

void writeTrace(const std::string& dir, const RunResult& r) {
  std::string name = r.problem + "-w" + std::to_string(r.workers) + "-" + r.method.label;
  if (r.method.tuner == "cat") name += "-" + r.method.tuner_cost_model;
  std::replace(name.begin(), name.end(), '+', '_');
  std::replace(name.begin(), name.end(), ':', '_');
  std::replace(name.begin(), name.end(), '/', '_');
  std::ofstream out(std::filesystem::path(dir) / (name + ".csv"));
  out << "round,f,relative_gap,bits,packets,packet_cost,selection_seconds\n"
      << std::setprecision(12);
  const Trace& t = r.trace;
  for (size_t k = 0; k < t.f.size(); ++k) {
    out << k << ',' << t.f[k] << ',' << (t.f[k] - r.fstar) / (r.f0 - r.fstar) << ',' << t.bits[k]
        << ',' << t.packets[k] << ',' << t.packet_cost[k] << ',' << t.selection_seconds[k] << '\n';
  }
}

bool biased(const std::string& compressor) { return compressor == "topk" || compressor == "sq"; }

// The methods of one (problem, workers) cell under one --error-feedback setting (off, on). With a
// residual only the biased compressors run (stochastic sparsification is unbiased and full GD
// sends everything: their runs without memory serve both settings), labelled "+ef", and CAT runs
// the paper's criterion on g + e (cat-C+ef) and the daemons' on the fresh gradient
// (cat-C-fresh+ef).
std::vector<MethodSpec> methodsFor(const Problem& p, size_t workers, const std::string& setting,
                                   const Options& o) {
  const bool ef = setting == "on";
  const std::string suffix = ef ? "+ef" : "";
  auto use = [&](const std::string& compressor) { return !ef || biased(compressor); };
  std::vector<MethodSpec> m;
  if (!ef) m.push_back({"full", "full", "identity", 0, 1, "payload", false});
  const auto grid = o.grid.empty() ? geometricGrid(o.grid_first, o.grid_factor, p.dim) : o.grid;
  for (const auto& c : o.fixed_compressors)
    for (uint32_t t : grid)
      if (t < p.dim && use(c))
        m.push_back(
            {"fixed-" + c + "-T" + std::to_string(t) + suffix, "fixed", c, t, 1, "payload", ef});
  m.push_back({"dynamic-sq" + suffix, "dynamic", "sq", 0, 1, "payload", ef});
  for (const std::string model : {"payload", "packet"}) {
    for (const std::string c : {"topk", "sq", "stochastic"}) {
      if (!use(c)) continue;
      MethodSpec cat{"cat-" + c + suffix, "cat", c, 0, 1, model, ef};
      m.push_back(cat);
      if (!ef) continue;
      cat.label = "cat-" + c + "-fresh" + suffix;
      cat.fresh = true;
      m.push_back(cat);
    }
    if (o.hybrid_every > 1 && workers == 1 && !ef) {
      for (const std::string c : {"topk", "sq"})
        m.push_back({"cat-" + c + "-S" + std::to_string(o.hybrid_every), "cat", c, 0,
                     o.hybrid_every, model, ef, o.hybrid_drift});
    }
  }
  return m;
}

// One (problem, workers, method) run. Every run is independent and seeded on its own.
struct Cell {
  const Problem* problem;
  size_t workers;
  const Shards* shards;
  MethodSpec method;
};

// Every cell of the run, in the order the report lists them; throws when a split fails.
std::vector<Cell> makeCells(const std::vector<Problem>& problems, const Options& o,
                            std::vector<std::unique_ptr<Shards>>& shard_sets) {
  std::vector<Cell> cells;
  auto wanted = [&](const MethodSpec& m) {
    return o.only.empty() || std::any_of(o.only.begin(), o.only.end(), [&](const auto& prefix) {
             return m.label.starts_with(prefix);
           });
  };
  for (const auto& p : problems) {
    for (size_t w : o.workers) {
      try {
        shard_sets.push_back(
            std::make_unique<Shards>(makeShards(p, w, o.seed, o.dirichlet_alpha, o.volume_ratio)));
      } catch (const std::exception& e) {
        throw std::runtime_error("cannot split " + p.name + " among " + std::to_string(w) +
                                 " workers: " + e.what());
      }
      for (const std::string& setting : kSettings) {
        if (std::find(o.error_feedback.begin(), o.error_feedback.end(), setting) ==
            o.error_feedback.end())
          continue;
        for (auto& m : methodsFor(p, w, setting, o))
          if (wanted(m)) cells.push_back({&p, w, shard_sets.back().get(), std::move(m)});
      }
    }
  }
  return cells;
}

RunLimits limitsFor(const Options& o, const Cell& c) {
  const Problem& p = *c.problem;
  RunLimits limits;
  limits.max_rounds = o.max_rounds;
  limits.stop_gap = o.targets.back() * (p.f0 - p.fstar);
  limits.per_worker_step = o.step_rule == "own";
  limits.batch = o.batch;
  return limits;
}

RunResult runCell(const Options& o, const Link& link, const Cell& c) {
  const auto t0 = std::chrono::steady_clock::now();
  const Problem& p = *c.problem;
  RunResult r;
  r.problem = p.name;
  r.workers = c.workers;
  r.method = c.method;
  r.fstar = p.fstar;
  r.f0 = p.f0;
  r.max_rounds = o.max_rounds;
  r.trace = train(p, *c.shards, c.method, link, limitsFor(o, c), o.seed);
  r.wall_seconds = secondsSince(t0);
  return r;
}

// Runs every cell on a shared queue over `threads` threads: both cores stay busy, and the
// results do not depend on the thread count.
std::vector<RunResult> runAll(const Options& o, const Link& link, const std::vector<Cell>& cells) {
  std::vector<RunResult> results(cells.size());
  std::atomic<size_t> next{0};
  std::mutex print;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < cells.size();) {
      const Cell& c = cells[i];
      RunResult r = runCell(o, link, c);
      {
        std::lock_guard lock(print);
        const double gap = (r.trace.f.back() - r.fstar) / (r.f0 - r.fstar);
        std::cout << "  [" << i + 1 << "/" << cells.size() << "] " << r.problem
                  << " w=" << c.workers << " " << c.method.label
                  << (c.method.tuner == "cat" ? " [" + c.method.tuner_cost_model + "]" : "") << ": "
                  << r.trace.f.size() - 1 << " rounds, rel. gap " << gap << ", mean T "
                  << r.trace.mean_level << (r.trace.diverged ? ", DIVERGED" : "") << ", "
                  << r.wall_seconds << " s" << std::endl;
      }
      if (!o.trace_dir.empty()) writeTrace(o.trace_dir, r);
      results[i] = std::move(r);
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 0; t < std::max<size_t>(1, o.threads); ++t) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  return results;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"CAT reproduction: communication-aware adaptive tuning of gradient compression"};
  addRunOptions(app, o);
  addMethodOptions(app, o);
  CLI11_PARSE(app, argc, argv);
  if (const auto error = settle(app, o)) {
    std::cerr << *error << "\n";
    return 2;
  }
  if (!o.trace_dir.empty()) std::filesystem::create_directories(o.trace_dir);
  const Link link{o.latency_ms * 1e-3, o.rate_mbps * 1e6, o.packet_bytes};
  const auto pm = packetModel(link);
  std::cout << "packet model: c_fixed = " << pm.fixedCost() * 1e3
            << " ms, c_packet = " << pm.packetCost() * 1e3 << " ms per " << o.packet_bytes
            << "-byte packet\n";
  std::vector<Problem> problems;
  std::vector<std::unique_ptr<Shards>> shard_sets;
  std::vector<Cell> cells;
  try {
    problems = loadProblems(o);
    cells = makeCells(problems, o, shard_sets);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  const auto t_runs = std::chrono::steady_clock::now();
  const std::vector<RunResult> results = runAll(o, link, cells);
  std::cout << cells.size() << " runs in " << secondsSince(t_runs) << " s on " << o.threads
            << " thread(s)\n";
  printTables(std::cout, results, o.targets);
  writeCsv(o.csv, results, o.targets);
  std::cout << "\nwrote " << o.csv << "\n";
  if (!o.plot.empty() && writePlot(o.plot, results, o.targets))
    std::cout << "wrote " << o.plot << "\n";
  return 0;
}
