#pragma once
// In-process data-parallel training for the CAT reproduction: every worker computes its
// gradient on its own shard, looks at v = g + e (error-feedback residual, when on), lets its
// tuner pick T, compresses, and the coordinator adds the decoded vectors weighted by data share
// and by the step each worker reported (or all by the smallest, RunLimits::per_worker_step).
// Records f(x_k) after every round and what reaching it cost on the wire.
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
// IID, equal shares; every worker computes the same split from the seed.
Shards makeShards(const Problem& problem, size_t workers, uint64_t seed);

struct MethodSpec {
  std::string label;             // e.g. full, fixed-topk-T64, dynamic-sq, cat-sq
  std::string tuner;             // full | fixed | dynamic | cat
  std::string compressor;        // identity | topk | sq | stochastic
  uint32_t fixed_level = 0;      // fixed
  uint32_t recompute_every = 1;  // cat
  std::string tuner_cost_model;  // the model the tuner optimises: payload | packet
  bool error_feedback = false;
  double recompute_drift = 1.25;  // cat hybrid: early recompute on shape drift (0 = off)
};

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
  // Stochastic sparsification on several workers (overrides per_worker_step): one step for the
  // sum u = sum p_i Q_i(v_i) of independent unbiased compressions, the minimiser of the descent
  // lemma's bound, gamma = G / (L (G + V)), where G = ||sum p_i v_i||^2 and
  // V = sum p_i^2 ||v_i||^2 (1/omega_i - 1) is the variance the workers report. G is not known
  // to anyone: the coordinator estimates it from the last round (||u||^2 - V is unbiased for it)
  // and hands it to the workers with the round, or, with aggregate_oracle, it is computed from
  // the true gradients (a bound on what the estimate can do). cat then picks T for the round's
  // decrease G^2 / (2L (G + V)) as if every worker's relative variance were its own:
  // argmax_T p_i G^2 / (2L (G + s ||v_i||^2 (1/omega_i(T) - 1))) / C(T), s = sum p_j^2.
  bool aggregate_step = false;
  bool aggregate_oracle = false;
  // true: tuners get ||g||^2 of the worker's gradient and cat credits no level with more than
  // the gradient step's ||g||^2 / (2L) (binds only with error feedback); false: the paper's
  // uncapped improvement of v = g + e.
  bool gradient_credit = false;
  // Stochastic sparsification only (an unbiased compressor; DIANA, Mishchenko et al. 2019):
  // worker i compresses g_i - h_i and moves its shift h_i by omega_i times what it sent, where
  // omega_i = L * (its step); the coordinator, which tracks every h_i from the pushes, applies
  // sum p_i h_i with the full-gradient step 1/L and each compressed difference with its
  // worker's own step. At the optimum the differences, not the local gradients, vanish, so the
  // compression noise does too and unequal steps weigh nothing that does not vanish.
  bool shifts = false;
  // With shifts: cat credits every level with the base (||g_i||^2 - ||g_i - h_i||^2)/(2L) that
  // the shift step earns (Tuner::choose); false: the paper's criterion on g_i - h_i alone.
  bool shift_credit = true;
};

Trace train(const Problem& problem, const Shards& shards, const MethodSpec& method,
            const Link& link, const RunLimits& limits, uint64_t seed);

costmodel::PacketCostModel packetModel(const Link& link);

}  // namespace tern::bench::cat
