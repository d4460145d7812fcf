#pragma once
// In-process data-parallel training for the CAT reproduction: every worker computes its
// gradient on its own shard, looks at v = g + e (error-feedback residual, when on), lets its
// tuner pick T, compresses, and the coordinator adds the decoded vectors weighted by data share
// and by the step each worker reported (or all by the smallest, RunLimits::per_worker_step).
// Records f(x_k) after every round and what reaching it cost on the wire. The method: docs/cat.md.
#include <cstdint>
#include <string>
#include <vector>

#include "common/costmodel/cost_model.hpp"
#include "common/ml/dataset.hpp"
#include "problems.hpp"

namespace tern::bench::cat {

struct Shards {
  std::vector<ml::Dataset> data;
  std::vector<double> shares;  // p_i = n_i / n
};
// Every worker computes the same split from the seed. Rows split among `workers` by ml::partition:
// IID and of equal volumes unless `dirichlet_alpha` > 0 (label skew) or `volume_ratio` > 1 (largest
// share over smallest).
Shards makeShards(const Problem& problem, size_t workers, uint64_t seed,
                  double dirichlet_alpha = 0.0, double volume_ratio = 1.0);

struct MethodSpec {
  std::string label;             // e.g. full, fixed-topk-T64, dynamic-sq, cat-sq, cat-sq-fresh
  std::string tuner;             // full | fixed | dynamic | cat
  std::string compressor;        // identity | topk | sq | stochastic
  uint32_t fixed_level = 0;      // fixed
  uint32_t recompute_every = 1;  // cat
  std::string tuner_cost_model;  // the model the tuner optimises: payload | packet
  bool error_feedback = false;
  double recompute_drift = 1.25;  // cat hybrid: early recompute on shape drift (0 = off)
  // cat with error_feedback: every level priced on the fresh gradient g, the level applied to
  // g + e, as the daemons' cat (docs/cat.md, "Pricing the fresh gradient"); false: the paper's
  // criterion on g + e (the daemons' cat-paper).
  bool fresh = false;
};
// The memory a method keeps, as its label's suffix says: "" (none) or "ef" (a residual).
inline std::string memoryOf(const MethodSpec& m) { return m.error_feedback ? "ef" : ""; }

struct Link {
  double latency_seconds = 5e-3;
  double rate_bits_per_second = 8e6;
  size_t packet_bytes = 1448;
};

// Cumulative quantities after k rounds, k = 0 .. rounds.
struct Trace {
  std::vector<double> f;                  // f(x_k)
  std::vector<double> bits;               // all workers' uplink bits before x_k
  std::vector<double> packets;            // all workers' packets (ceil(bytes / P_max) per push)
  std::vector<double> packet_cost;        // sum of c_fixed + c_packet * packets per push (seconds)
  std::vector<double> selection_seconds;  // time spent in the tuners
  double mean_level = 0.0;                // average T per push
  bool diverged = false;
};

struct RunLimits {
  size_t max_rounds = 1000;
  double stop_gap = 0.0;  // stop once f - f* <= stop_gap (the smallest target)
  // false: one step for all, the smallest the workers report; true: each worker's vector is
  // scaled by its own reported step. They differ only for stochastic sparsification.
  bool per_worker_step = true;
  // Each worker's gradient from `batch` of its rows drawn afresh every round (without
  // replacement, seeded per worker), as the daemons compute theirs; 0 = all its rows. f and the
  // targets stay the whole objective's.
  size_t batch = 0;
};

Trace train(const Problem& problem, const Shards& shards, const MethodSpec& method,
            const Link& link, const RunLimits& limits, uint64_t seed);

costmodel::PacketCostModel packetModel(const Link& link);

}  // namespace tern::bench::cat
