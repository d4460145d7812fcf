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

// Runs of one (problem, workers) group, in the order they were given.
std::vector<std::pair<std::string, size_t>> groups(const std::vector<RunResult>& runs) {
  std::vector<std::pair<std::string, size_t>> out;
  for (const auto& r : runs) {
    const auto key = std::make_pair(r.problem, r.workers);
    if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
  }
  return out;
}

const RunResult* findRun(const std::vector<RunResult>& runs, const std::string& problem,
                         size_t workers, const std::string& label, const std::string& model) {
  for (const auto& r : runs) {
    if (r.problem != problem || r.workers != workers || r.method.label != label) continue;
    const auto models = reportedModels(r);
    if (std::find(models.begin(), models.end(), model) != models.end()) return &r;
  }
  return nullptr;
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

Best bestFixed(const std::vector<RunResult>& runs, const std::string& problem, size_t workers,
               double target, const std::string& model, const std::string& compressor = "") {
  Best best;
  for (const auto& r : runs) {
    if (r.problem != problem || r.workers != workers || !isFixed(r)) continue;
    if (!compressor.empty() && r.method.compressor != compressor) continue;
    const auto h = firstHit(r, target);
    if (!h) continue;
    const double c = h->cost(model);
    if (!best.run || c < best.cost) best = {&r, c};
  }
  return best;
}

const std::vector<std::string> kCatCompressors = {"topk", "sq", "stochastic"};

std::string catLabel(const std::string& compressor) { return "cat-" + compressor; }

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
  // The best fixed T in hindsight, per cost model and target, named after the run it is.
  for (const auto& [problem, workers] : groups(runs)) {
    for (const std::string model : {"payload", "packet"}) {
      for (double t : targets) {
        const Best b = bestFixed(runs, problem, workers, t, model);
        if (b.run) {
          row(*b.run, "best-fixed[" + b.run->method.label + "]", model, t);
        } else {
          out << problem << ',' << workers << ",best-fixed," << model << ',' << fmtTarget(t)
              << ",,,,,\n";
        }
      }
    }
  }
}

void printTables(std::ostream& out, const std::vector<RunResult>& runs,
                 const std::vector<double>& targets) {
  // 1. Cost to target per method, and CAT (its best compressor) against the best fixed T.
  out << "\n== Cost to reach f - f* <= target * (f0 - f*)   (payload: bits; packet: seconds on "
         "the modelled link; '-' = not reached) ==\n";
  for (const auto& [problem, workers] : groups(runs)) {
    for (const std::string model : {"payload", "packet"}) {
      out << "\n" << problem << ", " << workers << " worker(s), " << model << " model\n";
      out << std::left << std::setw(8) << "target" << std::setw(11) << "full" << std::setw(34)
          << "best fixed T (hindsight)" << std::setw(11) << "dyn-sq";
      for (const auto& c : kCatCompressors) out << std::setw(16) << catLabel(c);
      out << std::setw(10) << "CAT/best"
          << "\n";
      for (double t : targets) {
        out << std::setw(8) << fmtTarget(t);
        out << std::setw(11)
            << cell(costOf(findRun(runs, problem, workers, "full", model), t, model));
        const Best b = bestFixed(runs, problem, workers, t, model);
        out << std::setw(34)
            << (b.run ? fmt(b.cost) + " (" + b.run->method.label + ")" : std::string("-"));
        out << std::setw(11)
            << cell(costOf(findRun(runs, problem, workers, "dynamic-sq", model), t, model));
        std::optional<double> cat_best;
        for (const auto& c : kCatCompressors) {
          const auto v = costOf(findRun(runs, problem, workers, catLabel(c), model), t, model);
          out << std::setw(16) << cell(v);
          if (v && (!cat_best || *v < *cat_best)) cat_best = v;
        }
        if (cat_best && b.run)
          out << std::setw(10) << fmt(*cat_best / b.cost);
        else
          out << std::setw(10) << "-";
        out << "\n";
      }
    }
  }

  // 2. Packet model: CAT S+Q against the dynamic S+Q rule, in packets.
  out << "\n== Packet model: packets to target, CAT S+Q vs dynamic S+Q (Alistarh et al.) ==\n";
  out << std::left << std::setw(18) << "problem" << std::setw(9) << "workers" << std::setw(8)
      << "target" << std::setw(12) << "dyn-sq" << std::setw(12) << "cat-sq"
      << "dyn/cat\n";
  for (const auto& [problem, workers] : groups(runs)) {
    for (double t : targets) {
      const auto dyn = packetsOf(findRun(runs, problem, workers, "dynamic-sq", "packet"), t);
      const auto cat = packetsOf(findRun(runs, problem, workers, "cat-sq", "packet"), t);
      out << std::setw(18) << problem << std::setw(9) << workers << std::setw(8) << fmtTarget(t)
          << std::setw(12) << cell(dyn, 6) << std::setw(12) << cell(cat, 6)
          << (dyn && cat ? fmt(*dyn / *cat) : "-") << "\n";
    }
  }

  // 3. Full gradient descent's bits against CAT's (its best compressor, payload model).
  out << "\n== Bits to target: full GD / CAT (best compressor, payload model); paper: up to 1e5 on "
         "RCV1 ==\n";
  out << std::left << std::setw(18) << "problem" << std::setw(9) << "workers" << std::setw(8)
      << "target" << std::setw(12) << "full bits" << std::setw(22) << "CAT bits"
      << "full/CAT\n";
  for (const auto& [problem, workers] : groups(runs)) {
    for (double t : targets) {
      const auto full = costOf(findRun(runs, problem, workers, "full", "payload"), t, "payload");
      std::optional<double> best;
      std::string which;
      for (const auto& c : kCatCompressors) {
        const auto v =
            costOf(findRun(runs, problem, workers, catLabel(c), "payload"), t, "payload");
        if (v && (!best || *v < *best)) {
          best = v;
          which = c;
        }
      }
      out << std::setw(18) << problem << std::setw(9) << workers << std::setw(8) << fmtTarget(t)
          << std::setw(12) << cell(full) << std::setw(22)
          << (best ? fmt(*best) + " (" + which + ")" : std::string("-"))
          << (full && best ? fmt(*full / *best) : "-") << "\n";
    }
  }

  // 4. Hybrid heuristic: recompute T* every S calls against every call.
  bool any_hybrid = false;
  for (const auto& r : runs) any_hybrid |= isHybrid(r);
  if (!any_hybrid) return;
  out << "\n== Hybrid heuristic: CAT recomputing T* every S calls vs every call ==\n";
  out << std::left << std::setw(18) << "problem" << std::setw(9) << "workers" << std::setw(22)
      << "method" << std::setw(9) << "model" << std::setw(8) << "target" << std::setw(12)
      << "sel s (S=1)" << std::setw(12) << "sel s (S)" << std::setw(10) << "time x" << std::setw(12)
      << "bits S=1" << std::setw(12) << "bits S"
      << "bits S/S=1\n";
  for (const auto& h : runs) {
    if (!isHybrid(h)) continue;
    const std::string base_label = catLabel(h.method.compressor);
    const auto* base = findRun(runs, h.problem, h.workers, base_label, h.method.tuner_cost_model);
    if (!base) continue;
    for (double t : targets) {
      const auto hb = firstHit(*base, t);
      const auto hh = firstHit(h, t);
      out << std::setw(18) << h.problem << std::setw(9) << h.workers << std::setw(22)
          << h.method.label << std::setw(9) << h.method.tuner_cost_model << std::setw(8)
          << fmtTarget(t) << std::setw(12) << (hb ? fmt(hb->selection_seconds) : "-")
          << std::setw(12) << (hh ? fmt(hh->selection_seconds) : "-") << std::setw(10)
          << (hb && hh && hh->selection_seconds > 0
                  ? fmt(hb->selection_seconds / hh->selection_seconds)
                  : "-")
          << std::setw(12) << (hb ? fmt(hb->bits) : "-") << std::setw(12)
          << (hh ? fmt(hh->bits) : "-") << (hb && hh ? fmt(hh->bits / hb->bits) : "-") << "\n";
    }
  }
}

bool writePlot(const std::string& png_path, const std::vector<RunResult>& runs) {
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
  // hindsight (fewest bits to the best accuracy any fixed T reached) is drawn.
  size_t block = 0;
  std::ostringstream plots;
  const size_t cols = 2;
  const size_t rows = (gs.size() + cols - 1) / cols;
  gp << "set terminal pngcairo size " << 700 * cols << "," << 480 * rows
     << " font ',9'\nset output '" << png_path << "'\n"
     << "set logscale xy\nset format x '10^{%L}'\nset format y '10^{%L}'\n"
     << "set xlabel 'bits sent (all workers)'\nset ylabel '(f - f*) / (f_0 - f*)'\n"
     << "set key bottom left font ',8'\nset grid\n"
     << "set multiplot layout " << rows << "," << cols << "\n";
  for (const auto& [problem, workers] : gs) {
    double reached = 1.0;
    for (const auto& r : runs) {
      if (r.problem != problem || r.workers != workers || !isFixed(r)) continue;
      for (size_t k = 0; k < r.trace.f.size(); ++k)
        reached = std::min(reached, (r.trace.f[k] - r.fstar) / (r.f0 - r.fstar));
    }
    const Best fixed = bestFixed(runs, problem, workers, std::max(reached, 1e-12), "payload");
    std::vector<std::string> parts;
    for (const auto& r : runs) {
      if (r.problem != problem || r.workers != workers || isHybrid(r)) continue;
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
    gp << "set title '" << problem << ", " << workers << " worker(s)'\nplot ";
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
