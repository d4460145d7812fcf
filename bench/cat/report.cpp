#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

namespace tern::bench::cat {
namespace {

std::string fmt(double v, int precision = 3) {
  std::ostringstream s;
  s << std::setprecision(precision) << v;
  return s.str();
}

std::string fmtTarget(double t) {
  std::ostringstream s;
  s << t;
  return s.str();
}

bool isFixed(const RunResult& r) { return r.method.tuner == "fixed"; }
bool isHybrid(const RunResult& r) {
  return r.method.tuner == "cat" && r.method.recompute_every > 1;
}

std::string cell(const std::optional<double>& v, int precision = 3) {
  return v ? fmt(*v, precision) : "-";
}

// A comparison group: one problem, one worker count, one memory (none or a residual; memoryOf).
// Methods are compared only inside a group.
struct Group {
  std::string problem;
  size_t workers = 1;
  std::string memory;
  bool operator==(const Group&) const = default;
  bool contains(const RunResult& r) const {
    return r.problem == problem && r.workers == workers && memoryOf(r.method) == memory;
  }
  // As --error-feedback names it.
  std::string setting() const { return memory.empty() ? "off" : "on"; }
  std::string name() const {
    return problem + ", " + std::to_string(workers) + " worker(s), error feedback " + setting();
  }
};

// Groups in the order their first run was given.
std::vector<Group> groups(const std::vector<RunResult>& runs) {
  std::vector<Group> out;
  for (const auto& r : runs) {
    const Group g{r.problem, r.workers, memoryOf(r.method)};
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  }
  return out;
}

// The run labelled `label` (without the memory's suffix) in group g under `model`. Full GD sends
// everything and has no memory: its one run serves both settings.
const RunResult* findRun(const std::vector<RunResult>& runs, const Group& g,
                         const std::string& label, const std::string& model) {
  auto find = [&](const std::string& memory) -> const RunResult* {
    const std::string full_label = label + (memory.empty() ? "" : "+" + memory);
    for (const auto& r : runs) {
      if (r.problem != g.problem || r.workers != g.workers || memoryOf(r.method) != memory ||
          r.method.label != full_label)
        continue;
      const auto models = reportedModels(r);
      if (std::find(models.begin(), models.end(), model) != models.end()) return &r;
    }
    return nullptr;
  };
  const RunResult* own = find(g.memory);
  return own || label != "full" ? own : find("");
}

std::optional<double> costOf(const RunResult* r, double target, const std::string& model) {
  if (!r) return std::nullopt;
  const auto h = firstHit(*r, target);
  if (!h) return std::nullopt;
  return h->cost(model);
}

std::optional<double> packetsOf(const RunResult* r, double target) {
  if (!r) return std::nullopt;
  const auto h = firstHit(*r, target);
  if (!h) return std::nullopt;
  return h->packets;
}

struct Best {
  const RunResult* run = nullptr;
  double cost = 0;
};

Best bestFixed(const std::vector<RunResult>& runs, const Group& g, double target,
               const std::string& model, const std::string& compressor = "") {
  Best best;
  for (const auto& r : runs) {
    if (!g.contains(r) || !isFixed(r)) continue;
    if (!compressor.empty() && r.method.compressor != compressor) continue;
    const auto h = firstHit(r, target);
    if (!h) continue;
    const double c = h->cost(model);
    if (!best.run || c < best.cost) best = {&r, c};
  }
  return best;
}

// Fixed-T runs that stopped at the iteration limit (not diverged) short of the target after
// spending less than `cost`: in hindsight one of them might still have beaten `cost`, so a
// ratio against the best fixed T that did finish is then only a bound.
std::vector<std::string> unfinishedCheaper(const std::vector<RunResult>& runs, const Group& g,
                                           double target, const std::string& model, double cost) {
  std::vector<std::string> out;
  for (const auto& r : runs) {
    if (!g.contains(r) || !isFixed(r) || r.trace.diverged || firstHit(r, target)) continue;
    const Trace& t = r.trace;
    const double spent = model == "packet" ? t.packet_cost.back() : t.bits.back();
    if (spent < cost) out.push_back(r.method.label);
  }
  return out;
}

const std::vector<std::string> kCatCompressors = {"topk", "sq", "stochastic"};

// CAT's label: the paper's criterion, or (fresh) the daemons' on the fresh gradient.
std::string catLabel(const std::string& compressor, bool fresh = false) {
  return "cat-" + compressor + (fresh ? "-fresh" : "");
}

// CAT with its best compressor in group g under one criterion: the cost and the compressor.
std::optional<std::pair<double, std::string>> bestCat(const std::vector<RunResult>& runs,
                                                      const Group& g, double target,
                                                      const std::string& model,
                                                      bool fresh = false) {
  std::optional<std::pair<double, std::string>> best;
  for (const auto& c : kCatCompressors) {
    const auto v = costOf(findRun(runs, g, catLabel(c, fresh), model), target, model);
    if (v && (!best || *v < best->first)) best = std::make_pair(*v, c);
  }
  return best;
}

// Calls f(hybrid run, target, hit with S = 1, hit with S) for every hybrid run and target.
template <typename F>
void forEachHybridHit(const std::vector<RunResult>& runs, const std::vector<double>& targets,
                      F&& f) {
  for (const auto& h : runs) {
    if (!isHybrid(h)) continue;
    const Group g{h.problem, h.workers, memoryOf(h.method)};
    const auto* base = findRun(runs, g, catLabel(h.method.compressor), h.method.tuner_cost_model);
    if (!base) continue;
    for (double t : targets) f(h, t, firstHit(*base, t), firstHit(h, t));
  }
}

// CAT's (one criterion) cost over the best fixed T's in group g, "*" when an unfinished fixed T
// had spent less; "" when either did not reach the target.
std::string catOverBest(const std::vector<RunResult>& runs, const Group& g, double target,
                        const std::string& model, bool fresh) {
  const auto cat = bestCat(runs, g, target, model, fresh);
  const Best b = bestFixed(runs, g, target, model);
  if (!cat || !b.run) return "";
  const bool open = !unfinishedCheaper(runs, g, target, model, cat->first).empty();
  return fmt(cat->first / b.cost) + (open ? "*" : "");
}

// The labels of the CAT columns of group g: the paper's criterion per compressor and, with a
// residual, the daemons' on the fresh gradient (top-T and S+Q: the compressors that keep one).
std::vector<std::string> catColumns(const Group& g) {
  std::vector<std::string> out;
  for (const auto& c : kCatCompressors) out.push_back(catLabel(c));
  if (!g.memory.empty())
    for (const std::string c : {"topk", "sq"}) out.push_back(catLabel(c, true));
  return out;
}

}  // namespace

std::optional<Hit> firstHit(const RunResult& run, double target) {
  const double gap = target * (run.f0 - run.fstar);
  const Trace& t = run.trace;
  for (size_t k = 0; k < t.f.size(); ++k) {
    if (t.f[k] - run.fstar <= gap)
      return Hit{k, t.bits[k], t.packets[k], t.packet_cost[k], t.selection_seconds[k]};
  }
  return std::nullopt;
}

std::vector<std::string> reportedModels(const RunResult& run) {
  if (run.method.tuner == "cat") return {run.method.tuner_cost_model};
  return {"payload", "packet"};
}

void writeCsv(const std::string& path, const std::vector<RunResult>& runs,
              const std::vector<double>& targets) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "problem,workers,method,cost_model,target,bits_to_target,packets_to_target,"
         "cost_to_target,iterations_to_target,selection_seconds\n";
  out << std::setprecision(10);
  auto row = [&](const RunResult& r, const std::string& method, const std::string& model,
                 double target) {
    out << r.problem << ',' << r.workers << ',' << method << ',' << model << ','
        << fmtTarget(target) << ',';
    if (const auto h = firstHit(r, target)) {
      out << h->bits << ',' << h->packets << ',' << h->cost(model) << ',' << h->iteration << ','
          << h->selection_seconds << '\n';
    } else {
      out << ",,,,\n";
    }
  };
  for (const auto& r : runs)
    for (const auto& model : reportedModels(r))
      for (double t : targets) row(r, r.method.label, model, t);
  // The best fixed T in hindsight, per setting, cost model and target, named after its run.
  for (const auto& g : groups(runs)) {
    const std::string label = "best-fixed" + (g.memory.empty() ? "" : "+" + g.memory);
    for (const std::string model : {"payload", "packet"}) {
      for (double t : targets) {
        const Best b = bestFixed(runs, g, t, model);
        if (b.run) {
          row(*b.run, label + "[" + b.run->method.label + "]", model, t);
        } else {
          out << g.problem << ',' << g.workers << ',' << label << ',' << model << ','
              << fmtTarget(t) << ",,,,,\n";
        }
      }
    }
  }
}

namespace {

bool anyHybrid(const std::vector<RunResult>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return isHybrid(r); });
}

void printCostTables(std::ostream& out, const std::vector<RunResult>& runs,
                     const std::vector<double>& targets) {
  // 1. Cost to target per method, and CAT (its best compressor) against the best fixed T: the
  // paper's criterion, and with a residual the daemons' on the fresh gradient.
  out << "\n== Cost to reach f - f* <= target * (f0 - f*)   (payload: bits; packet: seconds on "
         "the modelled link; '-' = not reached; '*' = a fixed T stopped by the iteration limit "
         "had spent less than CAT) ==\n";
  for (const auto& g : groups(runs)) {
    const auto cats = catColumns(g);
    for (const std::string model : {"payload", "packet"}) {
      out << "\n" << g.name() << ", " << model << " model\n";
      out << std::left << std::setw(8) << "target" << std::setw(11) << "full" << std::setw(34)
          << "best fixed T (hindsight)" << std::setw(11) << "dyn-sq";
      for (const auto& c : cats) out << std::setw(22) << c;
      out << std::setw(10) << "CAT/best" << (g.memory.empty() ? "" : "fresh/best") << "\n";
      for (double t : targets) {
        out << std::setw(8) << fmtTarget(t);
        out << std::setw(11) << cell(costOf(findRun(runs, g, "full", model), t, model));
        const Best b = bestFixed(runs, g, t, model);
        out << std::setw(34)
            << (b.run ? fmt(b.cost) + " (" + b.run->method.label + ")" : std::string("-"));
        out << std::setw(11) << cell(costOf(findRun(runs, g, "dynamic-sq", model), t, model));
        for (const auto& c : cats)
          out << std::setw(22) << cell(costOf(findRun(runs, g, c, model), t, model));
        const std::string paper = catOverBest(runs, g, t, model, false);
        out << std::setw(10) << (paper.empty() ? "-" : paper);
        if (!g.memory.empty()) {
          const std::string fresh = catOverBest(runs, g, t, model, true);
          out << (fresh.empty() ? "-" : fresh);
        }
        out << "\n";
      }
    }
  }
}

void printPacketTable(std::ostream& out, const std::vector<RunResult>& runs,
                      const std::vector<double>& targets) {
  // 2. Packet model: CAT S+Q (both criteria with a residual) against the dynamic S+Q rule.
  out << "\n== Packet model: packets to target, CAT S+Q vs dynamic S+Q (Alistarh et al.) ==\n";
  out << std::left << std::setw(48) << "group" << std::setw(8) << "target" << std::setw(12)
      << "dyn-sq" << std::setw(12) << "cat-sq" << std::setw(10) << "dyn/cat" << std::setw(14)
      << "cat-sq-fresh"
      << "dyn/fresh\n";
  for (const auto& g : groups(runs)) {
    for (double t : targets) {
      const auto dyn = packetsOf(findRun(runs, g, "dynamic-sq", "packet"), t);
      const auto cat = packetsOf(findRun(runs, g, catLabel("sq"), "packet"), t);
      const auto fresh = packetsOf(findRun(runs, g, catLabel("sq", true), "packet"), t);
      out << std::setw(48) << g.name() << std::setw(8) << fmtTarget(t) << std::setw(12)
          << cell(dyn, 6) << std::setw(12) << cell(cat, 6) << std::setw(10)
          << (dyn && cat ? fmt(*dyn / *cat) : "-") << std::setw(14) << cell(fresh, 6)
          << (dyn && fresh ? fmt(*dyn / *fresh) : "-") << "\n";
    }
  }
}

void printFullTable(std::ostream& out, const std::vector<RunResult>& runs,
                    const std::vector<double>& targets) {
  // 3. Full gradient descent's bits against CAT's (its best compressor, payload model).
  out << "\n== Bits to target: full GD / CAT (best compressor, payload model); paper: up to 1e5 on "
         "RCV1 ==\n";
  out << std::left << std::setw(48) << "group" << std::setw(8) << "target" << std::setw(12)
      << "full bits" << std::setw(22) << "CAT bits"
      << "full/CAT\n";
  for (const auto& g : groups(runs)) {
    for (double t : targets) {
      const auto full = costOf(findRun(runs, g, "full", "payload"), t, "payload");
      const auto cat = bestCat(runs, g, t, "payload");
      out << std::setw(48) << g.name() << std::setw(8) << fmtTarget(t) << std::setw(12)
          << cell(full) << std::setw(22)
          << (cat ? fmt(cat->first) + " (" + cat->second + ")" : std::string("-"))
          << (full && cat ? fmt(*full / cat->first) : "-") << "\n";
    }
  }
}

void printHybridTable(std::ostream& out, const std::vector<RunResult>& runs,
                      const std::vector<double>& targets) {
  // 4. Hybrid heuristic: recompute T* every S calls against every call.
  if (anyHybrid(runs)) {
    out << "\n== Hybrid heuristic: CAT recomputing T* every S calls vs every call ==\n";
    out << std::left << std::setw(18) << "problem" << std::setw(9) << "workers" << std::setw(22)
        << "method" << std::setw(9) << "model" << std::setw(8) << "target" << std::setw(12)
        << "sel s (S=1)" << std::setw(12) << "sel s (S)" << std::setw(10) << "time x"
        << std::setw(12) << "bits S=1" << std::setw(12) << "bits S"
        << "bits S/S=1\n";
    forEachHybridHit(
        runs, targets,
        [&](const RunResult& h, double t, const std::optional<Hit>& hb,
            const std::optional<Hit>& hh) {
          out << std::setw(18) << h.problem << std::setw(9) << h.workers << std::setw(22)
              << h.method.label << std::setw(9) << h.method.tuner_cost_model << std::setw(8)
              << fmtTarget(t) << std::setw(12) << (hb ? fmt(hb->selection_seconds) : "-")
              << std::setw(12) << (hh ? fmt(hh->selection_seconds) : "-") << std::setw(10)
              << (hb && hh && hh->selection_seconds > 0
                      ? fmt(hb->selection_seconds / hh->selection_seconds)
                      : "-")
              << std::setw(12) << (hb ? fmt(hb->bits) : "-") << std::setw(12)
              << (hh ? fmt(hh->bits) : "-") << (hb && hh ? fmt(hh->bits / hb->bits) : "-") << "\n";
        });
  }
}

// One row of the summary: group g, one cost model and target.
void summaryRow(std::ostream& out, const std::vector<RunResult>& runs, const Group& g,
                const std::string& model, double t) {
  const auto cat = bestCat(runs, g, t, model);
  const Best b = bestFixed(runs, g, t, model);
  out << "| " << g.problem << " | " << g.workers << " | " << g.setting() << " | " << model << " | "
      << fmtTarget(t) << " | "
      << (cat ? fmt(cat->first) + " (" + cat->second + ")" : std::string("not reached")) << " | "
      << (b.run ? fmt(b.cost) + " (" + b.run->method.label + ")" : std::string("none")) << " | "
      << catOverBest(runs, g, t, model, false) << " | " << catOverBest(runs, g, t, model, true)
      << " | ";
  if (model == "packet") {
    const auto dyn = packetsOf(findRun(runs, g, "dynamic-sq", "packet"), t);
    const auto csq = packetsOf(findRun(runs, g, catLabel("sq"), "packet"), t);
    if (dyn && csq) out << fmt(*dyn / *csq);
  }
  out << " | ";
  if (model == "payload") {
    const auto full = costOf(findRun(runs, g, "full", "payload"), t, "payload");
    if (full && cat) out << fmt(*full / cat->first);
  }
  out << " |\n";
}

void printSummary(std::ostream& out, const std::vector<RunResult>& runs,
                  const std::vector<double>& targets) {
  // 5. The summary, as a Markdown table; "CAT fresh": the daemons' criterion (with a residual).
  out << "\n== Summary (Markdown) ==\n\n"
      << "| problem | workers | error feedback | cost model | target | CAT (best compressor) | "
         "best fixed T | CAT / best fixed | CAT fresh / best fixed | dyn-sq / CAT-sq packets | "
         "full / CAT bits |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& g : groups(runs))
    for (const std::string model : {"payload", "packet"})
      for (double t : targets) summaryRow(out, runs, g, model, t);
  if (anyHybrid(runs)) {
    out << "\n| problem | cost model | method | target | selection time S=1 / S | bits S / S=1 "
           "|\n|---|---|---|---|---|---|\n";
    forEachHybridHit(runs, targets,
                     [&](const RunResult& h, double t, const std::optional<Hit>& hb,
                         const std::optional<Hit>& hh) {
                       out << "| " << h.problem << " | " << h.method.tuner_cost_model << " | "
                           << h.method.label << " | " << fmtTarget(t) << " | "
                           << (hb && hh && hh->selection_seconds > 0
                                   ? fmt(hb->selection_seconds / hh->selection_seconds)
                                   : "")
                           << " | " << (hb && hh ? fmt(hh->bits / hb->bits) : "") << " |\n";
                     });
  }
}

}  // namespace

void printTables(std::ostream& out, const std::vector<RunResult>& runs,
                 const std::vector<double>& targets) {
  printCostTables(out, runs, targets);
  printPacketTable(out, runs, targets);
  printFullTable(out, runs, targets);
  printHybridTable(out, runs, targets);
  printSummary(out, runs, targets);
}

bool writePlot(const std::string& png_path, const std::vector<RunResult>& runs,
               const std::vector<double>& targets) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    std::cerr << "gnuplot not found: no plot written (apt-get install -y gnuplot-nox); the CSV "
                 "and tables are complete without it.\n";
    return false;
  }
  const auto gs = groups(runs);
  const std::filesystem::path data_path = std::filesystem::path(png_path).replace_extension(".dat");
  const std::filesystem::path script_path =
      std::filesystem::path(png_path).replace_extension(".gp");
  std::ofstream data(data_path);
  std::ofstream gp(script_path);
  if (!data || !gp) {
    std::cerr << "cannot write the plot's data next to " << png_path << "\n";
    return false;
  }
  // Curves: every method except the hybrid runs and the fixed grid, of which only the best in
  // hindsight (fewest bits to the smallest target) is drawn. Full GD (step 1/L) is drawn
  // in every panel of its problem and worker count.
  size_t block = 0;
  const size_t cols = 2;
  const size_t rows = (gs.size() + cols - 1) / cols;
  gp << "set terminal pngcairo size " << 700 * cols << "," << 480 * rows
     << " font ',9'\nset output '" << png_path << "'\n"
     << "set logscale xy\nset format x '10^{%L}'\nset format y '10^{%L}'\n"
     << "set xlabel 'bits sent (all workers)'\nset ylabel '(f - f*) / (f_0 - f*)'\n"
     << "set key bottom left font ',8'\nset grid\n"
     << "set multiplot layout " << rows << "," << cols << "\n";
  for (const auto& g : gs) {
    double reached = 1.0;
    for (const auto& r : runs) {
      if (!g.contains(r) || !isFixed(r)) continue;
      for (size_t k = 0; k < r.trace.f.size(); ++k)
        reached = std::min(reached, (r.trace.f[k] - r.fstar) / (r.f0 - r.fstar));
    }
    // The best fixed T at the smallest target some fixed T reached (else at its best accuracy).
    Best fixed = bestFixed(runs, g, std::max(reached, 1e-12), "payload");
    for (double t : targets)
      if (const Best b = bestFixed(runs, g, t, "payload"); b.run) fixed = b;
    std::vector<std::string> parts;
    for (const auto& r : runs) {
      const bool is_full = r.method.label == "full";
      if (isHybrid(r)) continue;
      if (is_full ? (r.problem != g.problem || r.workers != g.workers) : !g.contains(r)) continue;
      if (isFixed(r) && &r != fixed.run) continue;
      std::string title = r.method.label;
      if (isFixed(r)) title = "best fixed: " + title;
      if (r.method.tuner == "cat") title += " (" + r.method.tuner_cost_model + " C)";
      // Log-spaced samples of the trace; points at or below f* cannot be drawn on a log axis.
      const Trace& t = r.trace;
      size_t last = std::numeric_limits<size_t>::max();
      for (double q = 0; q <= 1.0001; q += 1.0 / 400) {
        const auto k = static_cast<size_t>(std::pow(double(t.f.size()), q)) - 1;
        if (k == last || k >= t.f.size()) continue;
        last = k;
        const double gap = (t.f[k] - r.fstar) / (r.f0 - r.fstar);
        if (t.bits[k] > 0 && gap > 0) data << t.bits[k] << ' ' << gap << '\n';
      }
      data << "\n\n";
      std::ostringstream p;
      p << "'" << data_path.string() << "' index " << block++ << " with lines lw 2"
        << (r.method.tuner == "cat" && r.method.tuner_cost_model == "packet" ? " dt 2" : "")
        << " title '" << title << "'";
      parts.push_back(p.str());
    }
    gp << "set title '" << g.name() << "'\nplot ";
    for (size_t i = 0; i < parts.size(); ++i) gp << (i ? ", \\\n     " : "") << parts[i];
    gp << "\n";
  }
  gp << "unset multiplot\n";
  data.close();
  gp.close();
  const std::string cmd = "gnuplot '" + script_path.string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::cerr << "gnuplot failed on " << script_path << "\n";
    return false;
  }
  std::filesystem::remove(data_path);
  std::filesystem::remove(script_path);
  return true;
}

}  // namespace tern::bench::cat
