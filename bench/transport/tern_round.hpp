#pragma once
// One tern round measured from outside: the built tern-coordinator and tern-loadgen (N
// protocol-complete workers that push noise) on loopback, timed by this process as the
// coordinator's metrics CSV gains its rows.
#include <cstddef>
#include <string>

namespace tern::bench {

struct TernCase {
  std::string name;         // the CSV's `case`
  std::string model;        // the coordinator's `model:` in flow YAML
  std::string compression;  // identity | topk
  double mean_ratio = 1.0;  // the coordinator's cap as a share of the model
  size_t workers = 4;
};

struct TernSetup {
  std::string bin_dir;   // where tern-coordinator and tern-loadgen are
  std::string data_dir;  // Fashion-MNIST's four .gz files
  int rounds = 30;       // timed rounds, after `warmup` untimed ones
  int warmup = 10;
};

struct TernResult {
  double round_ms = 0;          // mean wall ms per timed round
  double faults_per_round = 0;  // the coordinator's minor faults per timed round
  size_t params = 0;            // the model's parameter count
  size_t down_bytes = 0;        // per worker per timed round (round starts, probes)
  size_t up_bytes = 0;          // per worker per timed round (pushes, probe answers)
};

// Runs one case to warmup + rounds closed rounds; throws std::runtime_error with the reason (and
// the daemons' last words) when a daemon fails or a round does not close with every worker.
TernResult ternRound(const TernSetup& setup, const TernCase& c);

}  // namespace tern::bench
