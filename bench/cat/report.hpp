#pragma once
// Results of the CAT reproduction: cost to reach each relative target, the CSV of issue 4,
// the comparison tables it asks for, and the suboptimality-against-bits plot (gnuplot).
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "training.hpp"

namespace tern::bench::cat {

struct RunResult {
  std::string problem;
  size_t workers = 1;
  MethodSpec method;
  Trace trace;
  double fstar = 0.0, f0 = 0.0;
  double wall_seconds = 0.0;
  size_t max_rounds = 0;
};

struct Hit {
  size_t iteration = 0;
  double bits = 0, packets = 0, packet_cost = 0, selection_seconds = 0;
  // Cost under the named model: bits for payload, seconds for packet.
  double cost(const std::string& model) const { return model == "packet" ? packet_cost : bits; }
};

// First x_k with f(x_k) - f* <= target * (f0 - f*).
std::optional<Hit> firstHit(const RunResult& run, double target);

// Cost models a run's rows are reported under: the one CAT optimised, or both for the
// cost-agnostic methods.
std::vector<std::string> reportedModels(const RunResult& run);

void writeCsv(const std::string& path, const std::vector<RunResult>& runs,
              const std::vector<double>& targets);

// Prints the comparison tables; returns nothing, judges nothing: the reader compares.
void printTables(std::ostream& out, const std::vector<RunResult>& runs,
                 const std::vector<double>& targets);

// Writes the PNG with gnuplot; returns false (after saying why) when it cannot.
// Targets are sorted from the largest down (as main passes them).
bool writePlot(const std::string& png_path, const std::vector<RunResult>& runs,
               const std::vector<double>& targets);

}  // namespace tern::bench::cat
