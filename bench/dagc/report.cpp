#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace tern::bench::dagc {
namespace {

// The runs of one experimental condition, every method and seed.
struct GroupKey {
  std::string setup;
  uint32_t workers;
  double sr;
  double mean_ratio;
  bool operator==(const GroupKey& o) const {
    return setup == o.setup && workers == o.workers && sr == o.sr && mean_ratio == o.mean_ratio;
  }
};

GroupKey keyOf(const RunResult& r) {
  return {r.spec.setup, r.spec.workers, r.spec.sr, r.spec.mean_ratio};
}

std::vector<GroupKey> groupsOf(const std::vector<RunResult>& runs) {
  std::vector<GroupKey> out;
  for (const auto& r : runs) {
    if (std::find(out.begin(), out.end(), keyOf(r)) == out.end()) out.push_back(keyOf(r));
  }
  return out;
}

std::vector<std::string> methodsOf(const std::vector<RunResult>& runs, const GroupKey& g) {
  std::vector<std::string> out;
  for (const auto& m : allMethods()) {
    for (const auto& r : runs) {
      if (keyOf(r) == g && r.spec.method.label == m.label) {
        out.push_back(m.label);
        break;
      }
    }
  }
  return out;
}

struct MethodStats {
  size_t seeds = 0;
  size_t reached = 0;
  double rounds = 0.0;   // mean; a miss counts at its rounds limit
  double seconds = 0.0;  // mean; a miss counts at its last simulated second
  double accuracy = 0.0;
  double bytes_per_round = 0.0;
  double upload_kb = 0.0;  // to the target (runs end there), or to the limit on a miss
  double lambda_bar = 0.0;
  bool complete() const { return reached == seeds; }
};

std::optional<MethodStats> statsOf(const std::vector<RunResult>& runs, const GroupKey& g,
                                   const std::string& method) {
  MethodStats s;
  for (const auto& r : runs) {
    if (!(keyOf(r) == g) || r.spec.method.label != method) continue;
    ++s.seeds;
    s.reached += r.rounds_to_target ? 1 : 0;
    s.rounds += double(r.rounds_to_target.value_or(r.rounds_run));
    s.seconds += r.seconds_to_target.value_or(r.sim_seconds);
    s.accuracy += r.final_accuracy;
    s.bytes_per_round += r.uploadBytesPerRound();
    s.upload_kb += double(r.upload_bytes) / 1e3;
    s.lambda_bar = r.spec.mean_threshold;
  }
  if (s.seeds == 0) return std::nullopt;
  const double n = double(s.seeds);
  s.rounds /= n;
  s.seconds /= n;
  s.accuracy /= n;
  s.bytes_per_round /= n;
  s.upload_kb /= n;
  return s;
}

std::string percent(double v) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << v * 100.0 << '%';
  return o.str();
}

std::string number(double v, int precision) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(precision) << v;
  return o.str();
}

// "1 - mine / base" when it means something; a reduction from a lower-bound baseline is itself
// a lower bound (and from a lower-bound method an upper bound, so it is left out).
std::string fewer(const MethodStats& mine, const std::optional<MethodStats>& base) {
  if (!base) return "";
  if (!mine.complete()) return "n/a";
  const std::string v = percent(1.0 - mine.rounds / base->rounds);
  return base->complete() ? v : ">=" + v;
}

std::string groupTitle(const GroupKey& g) {
  std::ostringstream o;
  o << g.setup << ": n=" << g.workers << ", SR=" << g.sr << ", mean ratio " << g.mean_ratio * 100.0
    << "%";
  return o.str();
}

std::string groupLabel(const GroupKey& g) {
  std::ostringstream o;
  if (g.setup == "skew") {
    o << "SR " << g.sr << ", " << g.mean_ratio * 100.0 << "%";
  } else {
    o << g.setup << ", " << g.mean_ratio * 100.0 << "%";
  }
  return o.str();
}

}  // namespace

void writeCsv(const std::string& path, const std::vector<RunResult>& runs) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "setup,sr,mean_ratio,method,seed,rounds_to_target,sim_seconds_to_target,"
         "final_accuracy,upload_bytes\n";
  for (const auto& r : runs) {
    out << r.spec.setup << ',' << r.spec.sr << ',' << r.spec.mean_ratio << ','
        << r.spec.method.label << ',' << r.spec.seed << ',';
    if (r.rounds_to_target) out << *r.rounds_to_target;
    out << ',';
    if (r.seconds_to_target) out << std::setprecision(6) << *r.seconds_to_target;
    out << ',' << std::setprecision(4) << r.final_accuracy << ',' << r.upload_bytes << '\n';
  }
  if (!out) throw std::runtime_error("failed writing " + path);
}

std::vector<RunResult> readCsv(const std::string& path,
                               const std::function<uint64_t(double)>& rounds_limit) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  std::getline(in, line);
  if (line.rfind("setup,sr,mean_ratio,method,seed,", 0) != 0) {
    throw std::runtime_error(path + ": not a tern-bench-dagc CSV");
  }
  std::vector<RunResult> out;
  for (size_t row = 2; std::getline(in, line); ++row) {
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (cells.size() == 8 && line.back() == ',') cells.emplace_back();
    if (cells.size() != 9) {
      throw std::runtime_error(path + ":" + std::to_string(row) + ": expected 9 columns");
    }
    try {
      RunResult r;
      RunSpec& s = r.spec;
      s.setup = cells[0];
      s.sr = std::stod(cells[1]);
      s.mean_ratio = std::stod(cells[2]);
      s.method = methodByLabel(cells[3]);
      s.seed = std::stoull(cells[4]);
      s.workers = s.setup == "motivation" ? 11 : 10;
      s.target = s.mean_ratio < 0.005 ? 0.75 : 0.80;
      s.max_rounds = rounds_limit(s.mean_ratio);
      s.measure_links = s.setup == "hetero";
      if (!cells[5].empty()) r.rounds_to_target = std::stoull(cells[5]);
      if (!cells[6].empty()) r.seconds_to_target = std::stod(cells[6]);
      r.final_accuracy = std::stod(cells[7]);
      r.upload_bytes = std::stoull(cells[8]);
      r.rounds_run = r.rounds_to_target.value_or(s.max_rounds);
      r.sim_seconds = r.seconds_to_target.value_or(0.0);
      out.push_back(std::move(r));
    } catch (const std::logic_error& e) {
      throw std::runtime_error(path + ":" + std::to_string(row) + ": " + e.what());
    }
  }
  return out;
}

void writeCurves(const std::string& path, const std::vector<RunResult>& runs) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "setup,sr,mean_ratio,method,seed,rounds,sim_seconds,accuracy,upload_bytes\n";
  for (const auto& r : runs) {
    for (const auto& p : r.curve) {
      out << r.spec.setup << ',' << r.spec.sr << ',' << r.spec.mean_ratio << ','
          << r.spec.method.label << ',' << r.spec.seed << ',' << p.rounds << ','
          << std::setprecision(6) << p.seconds << ',' << std::setprecision(4) << p.accuracy << ','
          << p.upload_bytes << '\n';
    }
  }
  if (!out) throw std::runtime_error("failed writing " + path);
}

void printSummary(std::ostream& out, const std::vector<RunResult>& runs) {
  out << std::defaultfloat << std::setprecision(6);
  out << "Means over seeds. rounds / sim s: to the target accuracy; '>=' when some seed missed "
         "it (counted at its limit).\n"
         "fewer: 1 - rounds / rounds of uniform (top-k) and of uniform-ht (threshold). "
         "B/round: upload bytes per round; KB: upload to the target.\n";
  for (const auto& g : groupsOf(runs)) {
    const double target = [&] {
      for (const auto& r : runs)
        if (keyOf(r) == g) return r.spec.target;
      return 0.0;
    }();
    bool measured = false;
    for (const auto& r : runs) measured = measured || (keyOf(r) == g && r.spec.measure_links);
    out << '\n'
        << groupTitle(g) << ", target " << target * 100.0 << "%"
        << (measured ? " (links measured: B/round includes the probes)" : "") << '\n';
    out << std::left << std::setw(12) << "method" << std::right << std::setw(8) << "reached"
        << std::setw(10) << "rounds" << std::setw(11) << "fewer" << std::setw(11) << "fewer-ht"
        << std::setw(10) << "sim s" << std::setw(9) << "acc" << std::setw(10) << "B/round"
        << std::setw(9) << "KB" << std::setw(11) << "lambda_bar" << '\n';
    const auto uniform = statsOf(runs, g, "uniform");
    const auto uniform_ht = statsOf(runs, g, "uniform-ht");
    for (const auto& m : methodsOf(runs, g)) {
      const auto s = *statsOf(runs, g, m);
      const std::string bound = s.complete() ? "" : ">=";
      out << std::left << std::setw(12) << m << std::right << std::setw(8)
          << (std::to_string(s.reached) + "/" + std::to_string(s.seeds)) << std::setw(10)
          << bound + number(s.rounds, 0) << std::setw(11)
          << (m == "uniform" ? "" : fewer(s, uniform)) << std::setw(11)
          << (methodByLabel(m).threshold() && m != "uniform-ht" ? fewer(s, uniform_ht) : "")
          << std::setw(10) << bound + number(s.seconds, 1) << std::setw(9) << number(s.accuracy, 4)
          << std::setw(10) << number(s.bytes_per_round, 0) << std::setw(9)
          << bound + number(s.upload_kb, 0) << std::setw(11)
          << (s.lambda_bar > 0 ? number(s.lambda_bar, 3) : "") << '\n';
    }
  }
}

bool writePlot(const std::string& png, const std::vector<RunResult>& runs, std::ostream& log) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    log << "note: gnuplot not found (Debian package gnuplot-nox); no plot written, the CSV has "
           "every number\n";
    return false;
  }
  // Left panel: mean rounds to target for every round-counted condition; right panel: mean
  // simulated seconds to target on heterogeneous links, where time is the measure.
  std::vector<GroupKey> rounds_groups, time_groups;
  for (const auto& g : groupsOf(runs))
    (g.setup == "hetero" ? time_groups : rounds_groups).push_back(g);
  // One colour per method in both panels; a panel lists only the methods it has runs of
  // (gnuplot rejects a histogram column without a single value).
  static const char* kColours[] = {"#4c72b0", "#dd8452", "#55a868", "#c44e52",
                                   "#8172b3", "#937860", "#da8bc3"};
  auto panel = [&](const std::string& name, const std::vector<GroupKey>& groups, bool seconds,
                   const std::string& title, const std::string& ylabel) {
    std::vector<std::pair<std::string, size_t>> methods;  // label, colour index
    for (size_t k = 0; k < allMethods().size(); ++k) {
      const auto& label = allMethods()[k].label;
      for (const auto& g : groups) {
        if (statsOf(runs, g, label)) {
          methods.emplace_back(label, k);
          break;
        }
      }
    }
    std::ostringstream o;
    // No header row: titles come from the plot command, and gnuplot would count the header as
    // row 0, shifting cluster k to x = k + 1.
    o << '$' << name << " << EOD\n";
    for (const auto& g : groups) {
      o << '"' << groupLabel(g) << '"';
      for (const auto& [m, k] : methods) {
        const auto s = statsOf(runs, g, m);
        o << ' ' << (s ? number(seconds ? s->seconds : s->rounds, 2) : "NaN");
      }
      o << '\n';
    }
    // Cluster k is centred on x = k; autoscaling would leave a cluster's width empty on the left.
    o << "EOD\nset xrange [-0.5:" << double(groups.size()) - 0.5 << "]\nset title '" << title
      << "'\nset ylabel '" << ylabel << "'\nplot ";
    for (size_t c = 0; c < methods.size(); ++c) {
      o << (c ? ", '' " : "$" + name + " ") << "using " << c + 2 << (c ? "" : ":xtic(1)")
        << " title '" << methods[c].first << "' lc rgb '" << kColours[methods[c].second % 7] << "'";
    }
    o << '\n';
    return o.str();
  };
  std::ostringstream gp;
  const bool two = !rounds_groups.empty() && !time_groups.empty();
  gp << "set terminal pngcairo size " << (two ? 1500 : 1050) << ",600 font 'Sans,10'\n"
     << "set output '" << png << "'\n"
     << "set style data histograms\nset style histogram clustered gap 1\n"
        "set style fill solid 0.85 border -1\nset boxwidth 0.9\nset grid ytics\n"
        "set key outside top center horizontal noenhanced\n"
        "set xtics rotate by -25 noenhanced\nset yrange [0:*]\n";
  // The heterogeneous panel has one condition: a narrow column beside the grid is enough.
  if (two) gp << "set multiplot\nset origin 0,0\nset size 0.7,1\n";
  if (!rounds_groups.empty()) {
    gp << panel("rounds", rounds_groups, false,
                "Rounds to target test accuracy (75% at 0.1%, 80% at 1%), mean over seeds; "
                "a miss counts at the limit",
                "rounds");
  }
  if (two)
    gp << "set origin 0.7,0\nset size 0.3,1\nset key outside top center vertical maxrows 4\n";
  if (!time_groups.empty()) {
    gp << panel("hetero", time_groups, true, "1 / 20 Mbit/s links: simulated s to target",
                "simulated seconds");
  }
  if (two) gp << "unset multiplot\n";
  FILE* pipe = popen("gnuplot", "w");
  if (!pipe) {
    log << "note: could not start gnuplot; no plot written\n";
    return false;
  }
  const std::string script = gp.str();
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int status = pclose(pipe);
  if (status != 0) {
    log << "note: gnuplot failed (status " << status << "); no plot written\n";
    return false;
  }
  return true;
}

}  // namespace tern::bench::dagc
