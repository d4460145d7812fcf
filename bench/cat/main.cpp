// tern-bench-cat: reproduces CAT (papers/cat.md, issue 4) in process. L2 logistic regression on
// Fashion-MNIST (binary), an RCV1-like synthetic problem and any LIBSVM file; 1 and 4 workers;
// full GD, a fixed-T grid, dynamic S+Q and CAT with top-T, S+Q and stochastic sparsification
// under the payload and the packet cost models, without and with error feedback. Prints tables,
// writes CSV and a PNG. The default grid finishes in minutes; --full runs the complete one.
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
#include <map>
#include <memory>
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

// The --error-feedback settings, in the order a run takes them.
const std::vector<std::string> kSettings = {"off", "on", "ef21", "ef21-block"};
// The --ef21-block-rule names.
const std::map<std::string, RunLimits::BlockRule> kBlockRules = {
    {"alike", RunLimits::BlockRule::kAlike},
    {"part", RunLimits::BlockRule::kPart},
    {"part-own", RunLimits::BlockRule::kPartOwn},
    {"part-global", RunLimits::BlockRule::kPartGlobal},
    {"difference", RunLimits::BlockRule::kDifference}};

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
  // improvement assumes; min: all with the smallest reported step. Equal for top-T and S+Q (1/L).
  std::string step_rule = "own";
  std::string credit = "uncapped";
  std::string ef21_select = "measured";
  bool ef21_skip = false;
  bool ef21_block_oracle = false;
  std::string ef21_block_rule = "alike";
  double dirichlet_alpha = 0.0;
  double volume_ratio = 1.0;
  size_t batch = 0;
  double ef21_momentum = 0.0;
  bool shifts = false;
  std::string shift_credit = "on";
  std::string noise_price = "smoothness";
  std::string noise_value = "direct";
  size_t horizon_rounds = 0;
  bool block_step = false;
  std::string block_select = "block";
  std::string select = "worker";
  std::vector<uint32_t> grid;
  uint32_t grid_first = 8, grid_factor = 8;
  std::vector<std::string> fixed_compressors = {"topk", "sq", "stochastic"};
  uint32_t hybrid_every = 200;
  double hybrid_drift = 1.25;
  // off: the paper's setting (compressed GD without memory); on: every biased compressor (top-T,
  // S+Q) keeps a residual, fixed, dynamic and CAT alike; ef21: EF21's state in its place;
  // ef21-block: EF21's state with the sum's block step (for its runs alone).
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

// The methods of one (problem, workers) cell under one --error-feedback setting (off, on, ef21,
// ef21-block). With memory only the biased compressors run (stochastic sparsification is unbiased
// and full GD sends everything: their runs without memory serve every setting but ef21-block,
// which has its own full GD under the block step), each labelled with the memory's suffix ("+ef":
// a residual; "+ef21": EF21's state; "+ef21-block": EF21's state with the sum's block step).
std::vector<MethodSpec> methodsFor(const Problem& p, size_t workers, const std::string& setting,
                                   const Options& o) {
  const bool ef = setting != "off";
  const bool block_sum = setting == "ef21-block";
  const bool ef21 = setting == "ef21" || block_sum;
  const std::string suffix = !ef ? "" : "+" + (ef21 ? setting : std::string("ef"));
  auto use = [&](const std::string& compressor) { return !ef || biased(compressor); };
  std::vector<MethodSpec> m;
  if (!ef) m.push_back({"full", "full", "identity", 0, 1, "payload", false});
  // Full GD with the block step: the reference of the setting's full GD / CAT column.
  if (block_sum) m.push_back({"full" + suffix, "full", "identity", 0, 1, "payload", false});
  const auto grid = o.grid.empty() ? geometricGrid(o.grid_first, o.grid_factor, p.dim) : o.grid;
  for (const auto& c : o.fixed_compressors)
    for (uint32_t t : grid)
      if (t < p.dim && use(c))
        m.push_back(
            {"fixed-" + c + "-T" + std::to_string(t) + suffix, "fixed", c, t, 1, "payload", ef});
  m.push_back({"dynamic-sq" + suffix, "dynamic", "sq", 0, 1, "payload", ef});
  for (const std::string model : {"payload", "packet"}) {
    for (const std::string c : {"topk", "sq", "stochastic"})
      if (use(c)) m.push_back({"cat-" + c + suffix, "cat", c, 0, 1, model, ef});
    if (o.hybrid_every > 1 && workers == 1 && !ef) {
      for (const std::string c : {"topk", "sq"})
        m.push_back({"cat-" + c + "-S" + std::to_string(o.hybrid_every), "cat", c, 0,
                     o.hybrid_every, model, ef, o.hybrid_drift});
    }
  }
  for (auto& spec : m) {
    spec.ef21 = ef21 && spec.error_feedback;
    spec.block_sum = block_sum;
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
  app.add_option("--hybrid-drift", o.hybrid_drift,
                 "hybrid: recompute early when ||v||_1^2/||v||_2^2 moves by this factor (0 = off)");
  app.add_option("--error-feedback", o.error_feedback,
                 "settings to run: off (the paper's), on (a residual on top-T and S+Q), ef21 "
                 "(EF21's state on top-T and S+Q: each worker compresses g_i - h_i and adds what "
                 "it sends to h_i, which the coordinator mirrors; the round steps along "
                 "sum p_i h_i), ef21-block (EF21's state with one block step for the sum, as "
                 "--block-step --step-rule sum give; full GD with the block step as its "
                 "reference), or several")
      ->check(CLI::IsMember(kSettings));
  app.add_option(
         "--step-rule", o.step_rule,
         "own: each worker's vector scaled by its own step; min: all by the smallest; "
         "aggregate: stochastic on several workers, one step for the sum from its "
         "variance, with ||sum p_i g_i||^2 estimated from the last round (aggregate-oracle: "
         "computed exactly); own-aggregate: each worker's own step, cat choosing T as under "
         "aggregate; own-share: each worker's own step, cat crediting its part of the sum's "
         "decrease under that step, with the same estimate; sum: with --block-step on several "
         "workers (or with --error-feedback ef21 on any number), one step for the "
         "sum of what the workers send, from two scalars each worker sends after it (runs "
         "the block step does not cover take the smallest); pooled: stochastic on several workers, "
         "one step for the sum from the workers' norms and noise, cat pricing each worker's noise "
         "against the round's ratio; an experiment, see docs/cat.md")
      ->check(CLI::IsMember({"own", "min", "aggregate", "aggregate-oracle", "own-aggregate",
                             "own-share", "sum", "pooled"}));
  app.add_option("--credit", o.credit,
                 "uncapped (default, the paper's): the improvement of g + e; gradient: cat "
                 "credits a level with at most ||g||^2 / (2L), the gradient step's decrease "
                 "(binds only with error feedback; an experiment, see docs/cat.md); virtual: "
                 "with error feedback, the descent the virtual iterate keeps, the residual "
                 "priced by the data's curvature (an experiment, see docs/cat.md); "
                 "virtual-oracle: the same for the sum of every worker's residual with the "
                 "global gradient (a diagnostic: no worker knows these)")
      ->check(CLI::IsMember({"gradient", "uncapped", "virtual", "virtual-oracle"}));
  app.add_option("--ef21-select", o.ef21_select,
                 "how cat chooses under --error-feedback ef21: measured (the default: each worker "
                 "maximises its share times 1 + the rounds what it leaves stays (its difference's "
                 "energy left over the energy it sends a round) times the improvement, less "
                 "lambda times the cost, lambda the running measured decrease of f per unit of "
                 "cost) or ratio (the best ratio of the state's descent plus the improvement to "
                 "the cost, as under shifts); see docs/cat.md")
      ->check(CLI::IsMember({"measured", "ratio"}));
  app.add_option("--batch", o.batch,
                 "each worker's gradient from this many of its rows, drawn afresh every round "
                 "(0 = all; f and the targets stay the whole objective's); an experiment, see "
                 "docs/cat.md");
  app.add_option(
         "--ef21-momentum", o.ef21_momentum,
         "with --error-feedback ef21: each worker compresses m_i - h_i for the running mean "
         "m_i <- (1 - eta) m_i + eta g_i of its gradients (EF21-SGDM; 0 = off, the "
         "gradient itself); an experiment, see docs/cat.md")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--ef21-block-oracle", o.ef21_block_oracle,
               "with --error-feedback ef21-block (or ef21 --block-step --step-rule sum) on several "
               "workers, a diagnostic (it overrides --ef21-block-rule): cat values each level by "
               "the round's exact decrease, from the global gradient, every row and the other "
               "workers' states; see docs/cat.md");
  app.add_option(
         "--ef21-block-rule", o.ef21_block_rule,
         "with --error-feedback ef21-block (or ef21 --block-step --step-rule sum) on several "
         "workers, what cat values a level by: the round's decrease as if every worker's "
         "difference were its own, its share of it (alike); its part alone moving the sum "
         "(part), with its own gradient (part-own) or, a diagnostic, the global one "
         "(part-global); its difference's block improvement (difference); see docs/cat.md")
      ->check(CLI::IsMember(kBlockRules));
  app.add_flag("--ef21-skip", o.ef21_skip,
               "with --error-feedback ef21 (measured): a worker may send nothing when no level "
               "pays at the measured price; an experiment, see docs/cat.md");
  app.add_flag("--shifts", o.shifts,
               "stochastic sparsification compresses g_i - h_i with learned shifts h_i "
               "(DIANA), fixed and CAT alike; an experiment, see docs/cat.md");
  app.add_flag("--block-step", o.block_step,
               "top-T, S+Q and full GD: step and improvement from the data's curvature bound on "
               "the block each level sends, for every method; on several workers see "
               "--step-rule (an experiment, see docs/cat.md)");
  app.add_option("--block-select", o.block_select,
                 "with --block-step, how cat picks T: block (each level's block improvement) "
                 "or paper (the paper's criterion at 1/L; only the step is the block's)")
      ->check(CLI::IsMember({"block", "paper"}));
  app.add_option("--select", o.select,
                 "cat on stochastic sparsification with a noise price (--noise-price diagonal "
                 "or a --step-rule aggregate/own-*) or with --credit virtual*: worker (each "
                 "worker's best ratio of improvement "
                 "to cost) or round (each worker maximises improvement - lambda * cost with "
                 "lambda the last round's total predicted improvement over its total predicted "
                 "cost: the round's best ratio, Dinkelbach's iteration) or measured (the same "
                 "with lambda the running mean of the rounds' measured decrease of f over their "
                 "cost) or measured-common "
                 "(with --step-rule pooled, a diagnostic: one level for all workers from every "
                 "worker's noise); an experiment, see docs/cat.md")
      ->check(CLI::IsMember({"worker", "round", "measured", "measured-common"}));
  app.add_option("--noise-value", o.noise_value,
                 "with --step-rule pooled: direct (cat values less noise by what it does at the "
                 "last round's step) or step (also by the longer step it buys, from the slope "
                 "measured at the last step's end); an experiment, see docs/cat.md")
      ->check(CLI::IsMember({"direct", "step"}));
  app.add_option(
         "--noise-price", o.noise_price,
         "stochastic sparsification: smoothness (the paper's: every coordinate's noise at "
         "L, step omega/L) or diagonal (coordinate j's at M_jj, the data's curvature "
         "bound there) or diagonal-secant (with --step-rule pooled: cat scales the "
         "diagonal price by the curvature measured along the last moves over their "
         "price at M's diagonal) or diagonal-hessian (each worker's Hessian diagonal at x "
         "in place of M's, every method; diagonal-hessian-global, a diagnostic: the whole "
         "objective's; diagonal-hessian-horizon, a diagnostic with --step-rule pooled --select "
         "measured: cat values a round by what it leaves of the gap after the rounds "
         "still to come, from the Hessian at x*; diagonal-hessian-horizon-rate: as many "
         "rounds as the measured rate needs to clear the gap; diagonal-hessian-horizon-target: "
         "to reach the smallest target at the present relative rate; "
         "diagonal-hessian-horizon-elapsed: as many rounds as have been run; "
         "diagonal-hessian-horizon-elapsed-at-x: the same from the Hessian at x and its "
         "Newton step, x* unused; diagonal-hessian-horizon-elapsed-diagonal: the same with "
         "every coordinate taken as an eigenvector, at the Hessian's diagonal; "
         "diagonal-hessian-horizon-elapsed-at-x-local: as -at-x with each worker's noise "
         "priced from its own rows' Hessian; diagonal-hessian-horizon-elapsed-local: "
         "everything from each worker's own rows and gradient, two scalars a push); an "
         "experiment, see docs/cat.md")
      ->check(CLI::IsMember(
          {"smoothness", "diagonal", "diagonal-secant", "diagonal-hessian",
           "diagonal-hessian-global", "diagonal-hessian-horizon", "diagonal-hessian-horizon-rate",
           "diagonal-hessian-horizon-target", "diagonal-hessian-horizon-elapsed",
           "diagonal-hessian-horizon-elapsed-at-x", "diagonal-hessian-horizon-elapsed-diagonal",
           "diagonal-hessian-horizon-elapsed-at-x-local",
           "diagonal-hessian-horizon-elapsed-local"}));
  app.add_option("--horizon-rounds", o.horizon_rounds,
                 "with --noise-price diagonal-hessian-horizon: the rounds the run is valued "
                 "at (taken in hindsight)");
  app.add_option(
         "--shift-credit", o.shift_credit,
         "with --shifts or --ef21-select ratio: on (cat credits the decrease the step along "
         "the shift or state h earns at every T, (||g||^2 - ||g - h||^2) / 2L) or off "
         "(the paper's criterion on g - h alone)")
      ->check(CLI::IsMember({"on", "off"}));
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
  CLI11_PARSE(app, argc, argv);
  if (o.full) {
    if (!app.count("--problems")) o.problems = {"fmnist", "synthetic"};
    if (!app.count("--fmnist-rows")) o.fmnist_rows = 5000;
    if (!app.count("--max-rounds")) o.max_rounds = 80000;
  }
  std::sort(o.targets.begin(), o.targets.end(), std::greater<>());
  const std::vector<double>& targets = o.targets;
  if (o.targets.empty() || o.targets.back() <= 0.0) {
    std::cerr << "--targets must be positive\n";
    return 2;
  }
  if (o.step_rule == "sum" && !o.block_step) {
    std::cerr << "--step-rule sum needs --block-step (its step comes from the block bound)\n";
    return 2;
  }
  if (o.noise_value == "step" && o.noise_price == "diagonal-secant") {
    std::cerr << "--noise-value step and --noise-price diagonal-secant both scale the noise "
                 "price: take one\n";
    return 2;
  }
  if (o.noise_price.starts_with("diagonal-hessian-horizon") &&
      (o.step_rule != "pooled" || o.select != "measured")) {
    std::cerr << "--noise-price diagonal-hessian-horizon needs --step-rule pooled and --select "
                 "measured\n";
    return 2;
  }
  if (!std::isfinite(o.dirichlet_alpha) || !std::isfinite(o.volume_ratio)) {
    std::cerr << "--dirichlet-alpha and --volume-ratio must be finite\n";
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
    for (const auto& p : problems)
      if (o.credit.starts_with("virtual") && p.data.is_sparse)
        throw std::invalid_argument("--credit virtual needs dense data; " + p.name + " is sparse");
    for (const auto& p : problems)
      if (o.noise_price.starts_with("diagonal-hessian-horizon") && p.data.is_sparse)
        throw std::invalid_argument("--noise-price " + o.noise_price + " needs dense data; " +
                                    p.name + " is sparse");
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }

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

  // Every (problem, workers, method) run is independent and seeded on its own: a shared queue
  // over all of them keeps both cores busy, and the results do not depend on the thread count.
  struct Cell {
    const Problem* problem;
    size_t workers;
    const Shards* shards;
    MethodSpec method;
  };
  std::vector<std::unique_ptr<Shards>> shard_sets;
  std::vector<Cell> cells;
  for (const auto& p : problems) {
    for (size_t w : o.workers) {
      try {
        shard_sets.push_back(
            std::make_unique<Shards>(makeShards(p, w, o.seed, o.dirichlet_alpha, o.volume_ratio)));
      } catch (const std::exception& e) {
        std::cerr << "error: cannot split " << p.name << " among " << w << " workers: " << e.what()
                  << "\n";
        return 1;
      }
      for (const std::string& setting : kSettings) {
        if (std::find(o.error_feedback.begin(), o.error_feedback.end(), setting) ==
            o.error_feedback.end())
          continue;
        for (auto& m : methodsFor(p, w, setting, o)) {
          const bool wanted =
              o.only.empty() || std::any_of(o.only.begin(), o.only.end(), [&](const auto& prefix) {
                return m.label.starts_with(prefix);
              });
          if (wanted) cells.push_back({&p, w, shard_sets.back().get(), std::move(m)});
        }
      }
    }
  }

  std::vector<RunResult> results(cells.size());
  std::atomic<size_t> next{0};
  std::mutex print;
  const auto t_runs = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < cells.size();) {
      const Cell& c = cells[i];
      const Problem& p = *c.problem;
      const auto t0 = std::chrono::steady_clock::now();
      RunLimits limits;
      limits.max_rounds = o.max_rounds;
      limits.stop_gap = targets.back() * (p.f0 - p.fstar);
      limits.per_worker_step = o.step_rule.starts_with("own");
      limits.aggregate_selection = o.step_rule.starts_with("own-");
      limits.own_share = o.step_rule == "own-share";
      limits.aggregate_step = o.step_rule.starts_with("aggregate");
      limits.aggregate_oracle = o.step_rule == "aggregate-oracle";
      limits.pooled_step = o.step_rule == "pooled";
      limits.diagonal_noise = o.noise_price.starts_with("diagonal");
      limits.secant_noise = o.noise_price == "diagonal-secant";
      limits.step_value = o.noise_value == "step";
      limits.hessian_noise = o.noise_price.starts_with("diagonal-hessian");
      limits.hessian_global = o.noise_price == "diagonal-hessian-global";
      if (o.noise_price.starts_with("diagonal-hessian-horizon")) {
        const std::string kind =
            o.noise_price.substr(std::string("diagonal-hessian-horizon").size());
        limits.horizon = kind == "-rate"                ? RunLimits::Horizon::kRate
                         : kind == "-target"            ? RunLimits::Horizon::kTarget
                         : kind.starts_with("-elapsed") ? RunLimits::Horizon::kElapsed
                                                        : RunLimits::Horizon::kRounds;
        limits.horizon_model = kind == "-elapsed-local"        ? RunLimits::HorizonModel::kLocal
                               : kind == "-elapsed-at-x-local" ? RunLimits::HorizonModel::kAtXLocal
                               : kind == "-elapsed-at-x"       ? RunLimits::HorizonModel::kAtX
                               : kind == "-elapsed-diagonal"   ? RunLimits::HorizonModel::kDiagonal
                                                               : RunLimits::HorizonModel::kOptimum;
      }
      limits.horizon_rounds = o.horizon_rounds;
      limits.gradient_credit = o.credit == "gradient";
      limits.ef21_ratio = o.ef21_select == "ratio";
      limits.ef21_skip = o.ef21_skip;
      limits.ef21_block_oracle = o.ef21_block_oracle;
      limits.ef21_block_rule = kBlockRules.at(o.ef21_block_rule);
      limits.batch = o.batch;
      limits.ef21_momentum = o.ef21_momentum;
      limits.virtual_credit = o.credit.starts_with("virtual");
      limits.virtual_oracle = o.credit == "virtual-oracle";
      limits.shifts = o.shifts;
      limits.block_step = o.block_step || c.method.block_sum;
      limits.sum_block_step = o.step_rule == "sum" || c.method.block_sum;
      limits.paper_selection = o.block_select == "paper";
      limits.round_ratio = o.select == "round" || o.select.starts_with("measured");
      limits.measured_ratio = o.select.starts_with("measured");
      limits.common_level = o.select == "measured-common";
      limits.shift_credit = o.shift_credit == "on";
      RunResult r;
      r.problem = p.name;
      r.workers = c.workers;
      r.method = c.method;
      r.fstar = p.fstar;
      r.f0 = p.f0;
      r.max_rounds = o.max_rounds;
      r.trace = train(p, *c.shards, c.method, link, limits, o.seed);
      r.wall_seconds = secondsSince(t0);
      {
        std::lock_guard lock(print);
        const double gap = (r.trace.f.back() - p.fstar) / (p.f0 - p.fstar);
        std::cout << "  [" << i + 1 << "/" << cells.size() << "] " << p.name << " w=" << c.workers
                  << " " << c.method.label
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
  std::cout << cells.size() << " runs in " << secondsSince(t_runs) << " s on " << o.threads
            << " thread(s)\n";

  printTables(std::cout, results, targets);
  writeCsv(o.csv, results, targets);
  std::cout << "\nwrote " << o.csv << "\n";
  if (!o.plot.empty() && writePlot(o.plot, results, targets))
    std::cout << "wrote " << o.plot << "\n";
  return 0;
}
