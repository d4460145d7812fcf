// tern-bench-cat: reproduces CAT (papers/cat.md, issue 4) in process. L2 logistic regression on
// Fashion-MNIST (binary), an RCV1-like synthetic problem and any LIBSVM file; 1 and 4 workers;
// full GD, a fixed-T grid, dynamic S+Q and CAT with top-T, S+Q and stochastic sparsification
// under the payload and the packet cost models. Prints tables, writes CSV and a PNG.
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
#include <mutex>
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

struct Options {
  std::string csv = "cat.csv";
  std::string plot = "cat.png";
  std::string libsvm;
  std::string fmnist_dir = "/usr/share/datasets/fashion-mnist";
  // A seeded twelfth of the training set keeps a default run near ten minutes on two cores.
  size_t fmnist_rows = 5000;
  std::vector<std::string> problems = {"fmnist", "synthetic"};
  std::vector<size_t> workers = {1, 4};
  size_t max_rounds = 2000;
  std::vector<uint32_t> grid;
  uint32_t grid_first = 8, grid_factor = 8;
  std::vector<std::string> fixed_compressors = {"topk", "sq", "stochastic"};
  uint32_t hybrid_every = 200;
  std::string error_feedback = "auto";
  size_t threads = 2;
  uint64_t seed = 1;
  size_t fstar_rounds = 20000;
  double latency_ms = 5.0, rate_mbps = 8.0;
  size_t packet_bytes = 1448;
  std::vector<std::string> only;  // run only methods whose label starts with one of these
  std::string trace_dir;          // when set, every run's f(x_k) and totals go there as CSV
  std::vector<double> targets = {1e-2, 1e-3, 1e-4};
};

void writeTrace(const std::string& dir, const RunResult& r) {
  std::string name = r.problem + "-w" + std::to_string(r.workers) + "-" + r.method.label;
  if (r.method.tuner == "cat") name += "-" + r.method.tuner_cost_model;
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

std::vector<MethodSpec> methodsFor(const Problem& p, size_t workers, const Options& o) {
  auto ef = [&](const std::string& compressor) {
    if (o.error_feedback == "on") return compressor != "identity";
    if (o.error_feedback == "off") return false;
    // auto: the paper's single-node compressed GD has CAT's descent guarantee without memory;
    // with several workers the biased compressors need error feedback to reach f*, while
    // stochastic sparsification is unbiased.
    return workers > 1 && (compressor == "topk" || compressor == "sq");
  };
  std::vector<MethodSpec> m;
  m.push_back({"full", "full", "identity", 0, 1, "payload", false});
  const auto grid = o.grid.empty() ? geometricGrid(o.grid_first, o.grid_factor, p.dim) : o.grid;
  for (const auto& c : o.fixed_compressors)
    for (uint32_t t : grid)
      if (t < p.dim)
        m.push_back({"fixed-" + c + "-T" + std::to_string(t), "fixed", c, t, 1, "payload", ef(c)});
  m.push_back({"dynamic-sq", "dynamic", "sq", 0, 1, "payload", ef("sq")});
  for (const std::string model : {"payload", "packet"}) {
    for (const std::string c : {"topk", "sq", "stochastic"})
      m.push_back({"cat-" + c, "cat", c, 0, 1, model, ef(c)});
    if (o.hybrid_every > 1 && workers == 1) {
      for (const std::string c : {"topk", "sq"})
        m.push_back({"cat-" + c + "-S" + std::to_string(o.hybrid_every), "cat", c, 0,
                     o.hybrid_every, model, ef(c)});
    }
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"CAT reproduction: communication-aware adaptive tuning of gradient compression"};
  app.add_option("--csv", o.csv, "CSV output");
  app.add_option("--plot", o.plot, "PNG plot output (needs gnuplot)");
  app.add_option("--libsvm", o.libsvm, "also run on this LIBSVM file (e.g. RCV1)");
  app.add_option("--fmnist-dir", o.fmnist_dir, "Fashion-MNIST IDX files");
  app.add_option("--fmnist-rows", o.fmnist_rows, "seeded subset of the training set (0 = all)");
  app.add_option("--problems", o.problems, "fmnist, synthetic (libsvm is added by --libsvm)");
  app.add_option("--workers", o.workers, "worker counts");
  app.add_option("--max-rounds", o.max_rounds, "iteration limit per run");
  app.add_option("--grid", o.grid,
                 "fixed-T grid (default: powers of --grid-factor from --grid-first)");
  app.add_option("--grid-first", o.grid_first, "smallest T of the default grid");
  app.add_option("--grid-factor", o.grid_factor, "ratio between grid points");
  app.add_option("--fixed-compressors", o.fixed_compressors, "compressors of the fixed-T grid");
  app.add_option("--hybrid-every", o.hybrid_every, "S of the hybrid heuristic (1 = skip)");
  app.add_option("--error-feedback", o.error_feedback, "auto | on | off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
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
  CLI11_PARSE(app, argc, argv);
  std::sort(o.targets.begin(), o.targets.end(), std::greater<>());
  const std::vector<double>& targets = o.targets;
  if (o.targets.empty() || o.targets.back() <= 0.0) {
    std::cerr << "--targets must be positive\n";
    return 2;
  }
  if (o.grid_factor < 2 || o.grid_first < 1) {
    std::cerr << "--grid-factor must be >= 2 and --grid-first >= 1\n";
    return 2;
  }

  if (!o.trace_dir.empty()) std::filesystem::create_directories(o.trace_dir);
  const Link link{o.latency_ms * 1e-3, o.rate_mbps * 1e6, o.packet_bytes};
  const auto pm = packetModel(link);
  std::cout << "packet model: c_fixed = " << pm.fixedCost() * 1e3
            << " ms, c_packet = " << pm.packetCost() * 1e3 << " ms per " << o.packet_bytes
            << "-byte packet\n";

  std::vector<Problem> problems;
  try {
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
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }

  for (auto& p : problems) {
    const auto t0 = std::chrono::steady_clock::now();
    solveOptimum(p, o.fstar_rounds, 1e-6);
    std::cout << p.name << ": n = " << p.data.rows() << ", d = " << p.dim
              << " (with bias), L = " << p.L << ", lambda = " << p.l2 << ", f0 = " << p.f0
              << ", f* = " << std::setprecision(12) << p.fstar << std::setprecision(6) << " ("
              << p.fstar_iterations
              << " accelerated rounds, final ||grad|| = " << p.fstar_gradient_norm << ", "
              << secondsSince(t0) << " s)" << std::endl;
  }

  std::vector<RunResult> results;
  for (const auto& p : problems) {
    for (size_t w : o.workers) {
      const Shards shards = makeShards(p, w, o.seed);
      auto methods = methodsFor(p, w, o);
      if (!o.only.empty()) {
        std::erase_if(methods, [&](const MethodSpec& m) {
          return std::none_of(o.only.begin(), o.only.end(), [&](const std::string& prefix) {
            return m.label.starts_with(prefix);
          });
        });
      }
      std::vector<RunResult> batch(methods.size());
      std::atomic<size_t> next{0};
      std::mutex print;
      auto worker = [&] {
        for (size_t i; (i = next.fetch_add(1)) < methods.size();) {
          const auto t0 = std::chrono::steady_clock::now();
          RunLimits limits;
          limits.max_rounds = o.max_rounds;
          limits.stop_gap = targets.back() * (p.f0 - p.fstar);
          RunResult r;
          r.problem = p.name;
          r.workers = w;
          r.method = methods[i];
          r.fstar = p.fstar;
          r.f0 = p.f0;
          r.max_rounds = o.max_rounds;
          r.trace = train(p, shards, methods[i], link, limits, o.seed);
          r.wall_seconds = secondsSince(t0);
          {
            std::lock_guard lock(print);
            const double gap = (r.trace.f.back() - p.fstar) / (p.f0 - p.fstar);
            std::cout << "  " << p.name << " w=" << w << " " << methods[i].label
                      << (methods[i].tuner == "cat" ? " [" + methods[i].tuner_cost_model + "]" : "")
                      << ": " << r.trace.f.size() - 1 << " rounds, rel. gap " << gap << ", mean T "
                      << r.trace.mean_level << (r.trace.diverged ? ", DIVERGED" : "") << ", "
                      << r.wall_seconds << " s" << std::endl;
          }
          if (!o.trace_dir.empty()) writeTrace(o.trace_dir, r);
          batch[i] = std::move(r);
        }
      };
      std::vector<std::thread> pool;
      for (size_t t = 0; t < std::max<size_t>(1, o.threads); ++t) pool.emplace_back(worker);
      for (auto& th : pool) th.join();
      for (auto& r : batch) results.push_back(std::move(r));
    }
  }

  printTables(std::cout, results, targets);
  writeCsv(o.csv, results, targets);
  std::cout << "\nwrote " << o.csv << "\n";
  if (!o.plot.empty() && writePlot(o.plot, results)) std::cout << "wrote " << o.plot << "\n";
  return 0;
}
