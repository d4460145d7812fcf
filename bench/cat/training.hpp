#pragma once
// In-process data-parallel training for the CAT reproduction: every worker computes its
// gradient on its own shard, looks at v = g + e (error-feedback residual, when on), lets its
// tuner pick T, compresses, and the coordinator adds the decoded vectors weighted by data share
// and by the step each worker reported (or all by the smallest, RunLimits::per_worker_step), or
// steps along their sum by the block step. Records f(x_k) after every round and what reaching it
// cost on the wire. The method: docs/cat.md.
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
  std::string label;             // e.g. full, fixed-topk-T64, dynamic-sq, cat-sq
  std::string tuner;             // full | fixed | dynamic | cat
  std::string compressor;        // identity | topk | sq | stochastic
  uint32_t fixed_level = 0;      // fixed
  uint32_t recompute_every = 1;  // cat
  std::string tuner_cost_model;  // the model the tuner optimises: payload | packet
  bool error_feedback = false;
  double recompute_drift = 1.25;  // cat hybrid: early recompute on shape drift (0 = off)
  // With error_feedback: EF21's state in place of the residual (docs/cat.md "EF21's state"):
  // each worker compresses g_i - h_i, both sides add what it sends to h_i, and the round steps
  // along sum p_i h_i.
  bool ef21 = false;
  // The setting ef21-block: EF21's state (top-T and S+Q) with one block step for the sum
  // (RunLimits::block_step and sum_block_step for this run); full GD in it takes the block step.
  bool block_sum = false;
};
// The memory a method keeps, as its label's suffix says: "" (none), "ef" (a residual), "ef21",
// "ef21-block" (EF21's state with the sum's block step; full GD's block-step run too).
inline std::string memoryOf(const MethodSpec& m) {
  if (m.block_sum) return "ef21-block";
  return !m.error_feedback ? "" : m.ef21 ? "ef21" : "ef";
}

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
  // replacement, seeded per worker), as the daemons compute theirs; 0 = all its rows. f, its
  // decrease (the measured price) and the targets stay the whole objective's.
  size_t batch = 0;
  // With EF21's state: each worker compresses m_i - h_i for a running mean of its gradients,
  // m_i <- (1 - eta) m_i + eta g_i (the first round's m_i = g_i), in place of g_i - h_i
  // (EF21-SGDM, docs/cat.md "EF21's state"); 0 = off.
  double ef21_momentum = 0.0;
  // Top-T, S+Q and full GD: each level's improvement and step from the curvature bound of the
  // block it sends (block_step.hpp; docs/cat.md "The block step"); cat scans every level's
  // block improvement, the other tuners pick theirs as usual and take its block step.
  bool block_step = false;
  // With block_step on several workers, or on one with EF21's state: one step for the sum
  // u = sum p_i q_i of what the workers decode to (with EF21, of their states), from two scalars
  // each worker sends in a message of its own (counted). false: per_worker_step decides.
  bool sum_block_step = false;
};

Trace train(const Problem& problem, const Shards& shards, const MethodSpec& method,
            const Link& link, const RunLimits& limits, uint64_t seed);

costmodel::PacketCostModel packetModel(const Link& link);

}  // namespace tern::bench::cat
