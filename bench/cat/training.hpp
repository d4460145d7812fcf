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
  // With error_feedback: EF21's state in place of the residual (Richtarik, Sokolov and
  // Fatkhullin 2021): each worker compresses the difference g_i - h_i between its gradient and
  // its state h_i, both sides add what it sends to h_i, and the round steps along sum p_i h_i.
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
  // Stochastic sparsification on several workers (overrides per_worker_step): one step for the
  // sum u = sum p_i Q_i(v_i) of independent unbiased compressions, the minimiser of the descent
  // lemma's bound, gamma = G / (L G + V), where G = ||sum p_i v_i||^2 and
  // V = sum p_i^2 P_i is the priced noise the workers report (P_i = L ||v_i||^2 (1/omega_i - 1)
  // at the smoothness price). G is not known to anyone: each worker reports <v_i, u> for the sum
  // u it receives, sum p_i <v_i, u> is unbiased for that round's G, and the coordinator hands
  // a running mean of it (weight 0.1 on the newest) to the workers with the next round: an
  // estimate that lags a shrinking G, so the step's guarantee holds only as far as the estimate
  // does. With aggregate_oracle G is computed from the true gradients. While no positive
  // estimate exists, workers choose alone and the round takes the smallest worker's step. Runs
  // this does not apply to (one worker, shifts, other compressors) take the smallest step. cat then
  // picks T for the round's decrease G^2 / (2 (L G + V)) as if every worker's noise were its own:
  // argmax_T p_i G^2 / (2 (L G + s P_i(T))) / C(T), s = sum p_j^2.
  bool aggregate_step = false;
  bool aggregate_oracle = false;
  // Stochastic sparsification with a noise price on several workers: one step for the sum,
  // gamma = sum p_i^2 S_i / (L sum p_i^2 S_i + sum p_i^2 P_i(T_i)) (every method), and cat's worker
  // i picks argmin_T gamma^2 p_i^2 P_i(T) / 2 + lambda C(T) with the last round's gamma and the
  // round's ratio lambda (with measured_ratio, the measured one).
  bool pooled_step = false;
  // With pooled_step and diagonal_noise: cat scales its noise price by the ratio of the running
  // means of the secant curvature along the last move, sum_i p_i <g_i(x_t) - g_i(x_{t-1}), dx>,
  // and of that move priced at M's diagonal, sum_j M_jj dx_j^2 (one scalar a round from each
  // worker, riding in its push like the reported improvement; not counted). The step keeps M.
  bool secant_noise = false;
  // With diagonal_noise: each worker prices its noise by the diagonal of its own rows' Hessian
  // at x (binary logistic regression) in place of M's, every method alike (the step too).
  bool hessian_noise = false;
  // With pooled_step: cat values its noise with what less of it does to the pooled step too,
  // scaling the price by 1 + 2 h / sw, h the running mean of the slope sum_i p_i <g_i(x_t),
  // u_{t-1}> at the last step's end along its sum u and sw that of sum_i p_i^2 S_i (floored
  // at 0).
  bool step_value = false;
  // horizon != kNone, with pooled_step, hessian_noise and measured_ratio (a diagnostic no
  // deployment can run): cat values a round by what it leaves of f's gap after the rounds still
  // to come rather than by that round's decrease. In the quadratic model at x* (Hessian
  // H* = V diag(l) V^T), a gap e = x - x* left after round t shrinks to (I - gamma H*)^m e after
  // the m rounds still to come (below) at the last pooled step gamma, so it is worth
  // F(x) = e^T W e / 2 with W = V diag(l_k (1 - gamma l_k)^(2m)) V^T. Each worker's
  // noise is priced at W's diagonal, lambda is the running mean of the rounds' decrease of F
  // over their cost, and with step_value less noise is also worth the longer step it buys, at
  // the slope of F along the last round's sum at the new point. Steps and fixed T keep the
  // Hessian diagonal at x. horizon_rounds is taken in hindsight (a run's rounds to a target).
  enum class Horizon {
    kNone,
    kRounds,   // m = horizon_rounds - t, then 0
    kRate,     // m = (f - f*) / (the running mean of f's decrease a round): the rounds the
               // present rate would take to clear the gap (f* known to the benchmark alone)
    kTarget,   // m = ln(gap / stop_gap) times that: the rounds to the run's smallest target
    kElapsed,  // m = the rounds run so far (a run is taken to last as long again)
  };
  Horizon horizon = Horizon::kNone;
  size_t horizon_rounds = 0;
  // Where the horizon's spectrum and gap come from: H* and x* (kOptimum); the whole objective's
  // Hessian at x every 20 rounds, the gap its Newton step H(x)^-1 g(x) on the global gradient,
  // x* unused (kAtX); the same with every coordinate taken as an eigenvector at the Hessian's
  // diagonal, the gap g_j / H_jj (kDiagonal); F from the whole objective's Hessian as with kAtX
  // but each worker's noise priced at the W_i of its own rows' Hessian at x (kAtXLocal); and
  // nothing global (kLocal): each worker's W_i from its own rows' Hessian at x, and F's decrease
  // over the last move delta and its slope along the last sum u as the share-weighted sums of
  // the workers' delta^T W_i e_i + delta^T W_i delta / 2 and u^T W_i e_i, with
  // W_i e_i = (I - gamma H_i)^(2m) g_i (two scalars in each push, not counted).
  enum class HorizonModel { kOptimum, kAtX, kDiagonal, kAtXLocal, kLocal };
  HorizonModel horizon_model = HorizonModel::kOptimum;
  // With hessian_noise (a diagnostic): the diagonal of the whole objective's Hessian at x, which
  // no worker has, for every worker.
  bool hessian_global = false;
  // With pooled_step and measured_ratio, without error feedback (a diagnostic): cat's workers
  // all send one level, argmin_T sum_i gamma^2 p_i^2 P_i(T) / 2 + lambda n C(T) over this
  // round's noise curves of every worker.
  bool common_level = false;
  // Each worker keeps its own step (per_worker_step) but cat picks T as under aggregate_step,
  // from the same running estimate of G, so that near the optimum, where G is far below the
  // workers' ||v_i||^2, it buys the larger T whose noise the sum can afford.
  bool aggregate_selection = false;
  // With aggregate_selection: cat credits a level with worker i's part of the bound on f's
  // decrease under its own step instead of a share of the common step's decrease.
  bool own_share = false;
  // Stochastic sparsification: price the compression noise by coordinate. The descent lemma
  // with M (Problem::curvature; M bounds the Hessian everywhere, L bounds M) gives, for an
  // unbiased Q with independent coordinates, E f(x - gamma Q) <= f - gamma S
  // + gamma^2 (L S + P) / 2 with S = ||g||^2 and P = sum_j M_jj Var_j: the step S / (L S + P)
  // and the decrease S^2 / (2 (L S + P)), for fixed T and cat alike (and, with aggregate_step,
  // G / (L G + sum p_i^2 P_i)). With shifts S and P are those of g_i - h_i, the base credit is
  // added as before, and h_i learns at omega_i = S / (S + sum_j Var_j), not at L times the
  // step. false: every coordinate priced at L (the paper's omega / L).
  bool diagonal_noise = false;
  // With a noise price (cat on stochastic sparsification) or virtual_credit: worker i picks
  // argmax_T improvement_i(T) - lambda C(T), lambda the last round's sum of the workers'
  // predicted improvements over the sum of their predicted costs (Dinkelbach's iteration for the
  // round's ratio sum_i improvement_i / sum_i C_i; the first round each worker's own best ratio).
  // One scalar a round from the coordinator, which has both sums from the pushes' reports.
  bool round_ratio = false;
  // With round_ratio: lambda from the measured decrease of f per unit of cost (running means).
  bool measured_ratio = false;
  // true: tuners get ||g||^2 of the worker's gradient and cat credits no level with more than
  // the gradient step's ||g||^2 / (2L) (binds only with error feedback); false: the paper's
  // uncapped improvement of v = g + e.
  bool gradient_credit = false;
  // How cat chooses under EF21's memory (MethodSpec::ef21). At step 1/L the descent lemma along
  // h_i + Q(v_i), v_i = g_i - h_i, gives exactly (||g_i||^2 - ||v_i - Q||^2) / 2L: the base
  // (||g_i||^2 - ||v_i||^2) / 2L the state earns whatever is sent, plus the paper's improvement
  // of v_i. false (the default): each worker maximises w_i improvement(T) - lambda C(T), lambda
  // the running measured decrease of f per unit of cost, w_i = p_i (1 + s_i) with s_i the
  // rounds what a push leaves in v_i stays there (Little's law: the running mean of the energy
  // left, ||v_i - Q||^2, over that of the energy sent, ||Q||^2). true: the best ratio of base
  // plus improvement to cost, as under shifts (the base with shift_credit only).
  bool ef21_ratio = false;
  // With EF21's measured criterion: level 0, no push at all, is a choice too (the coordinator
  // steps along the worker's state as it stands); an experiment beyond the paper's T >= 1.
  bool ef21_skip = false;
  // A diagnostic for EF21's state with the sum's block step on several workers: cat values each
  // level by the round's exact decrease along the sum of the states, from the global gradient,
  // every row and the other workers' states (which no worker knows).
  bool ef21_block_oracle = false;
  // With EF21's state and the sum's block step on several workers, what worker i's cat values a
  // level by. Each knows the sum of the states, u = sum p_k h_k (the round's direction, sent to
  // it for the step's scalars), its own rows (M_i) and its difference v_i; f's gradient is
  // u + sum p_k v_k. kAlike: the round's decrease as if every worker's difference were its own,
  // D(u + Q(v_i)) with f's gradient u + v_i, of which its share p_i is its own. kPart: the same
  // gradient, its part alone moving the sum, D(u + p_i Q(v_i)), unweighted; kPartOwn: that with
  // its own gradient g_i; kPartGlobal: with the global gradient (a diagnostic). kDifference: the
  // block improvement of its difference, <v, q>^2 / (2 q^T M_i q), unweighted.
  enum class BlockRule { kAlike, kPart, kPartOwn, kPartGlobal, kDifference };
  BlockRule ef21_block_rule = BlockRule::kAlike;
  // Each worker's gradient from `batch` of its rows drawn afresh every round (without
  // replacement, seeded per worker), as the daemons compute theirs; 0 = all its rows. f, its
  // decrease (the measured price) and the targets stay the whole objective's.
  size_t batch = 0;
  // With EF21's state: each worker compresses m_i - h_i for a running mean of its gradients,
  // m_i <- (1 - eta) m_i + eta g_i (the first round's m_i = g_i), in place of g_i - h_i (EF21-SGDM,
  // Fatkhullin et al. 2023); 0 = off.
  double ef21_momentum = 0.0;
  // true: with error feedback, cat (top-T and S+Q) credits level T with the descent that error
  // feedback's virtual iterate x~ = x - e/L keeps next round: ||g||^2 / 2L less what the
  // residual e_T = v - Q_T(v) costs it, |<H e_T, g>| / L^2 <= sqrt(e_T^T H e_T g^T H g) / L^2,
  // with H the Hessian at x of the worker's local objective (x~ is within e/L of x) and g taken
  // as the next gradient; the best ratio to C(T) among positive credits, else the largest
  // credit. Dense data only; each push costs O(n d) (bench only).
  bool virtual_credit = false;
  // With virtual_credit on several workers, a diagnostic no deployment can run: worker i prices
  // the residual of the sum, E_T = sum_{k != i} p_k e_k + p_i e_T (the other workers' residuals
  // as they stand), with the global gradient and the Hessian of every row, and takes its share
  // p_i of the sum's descent. It measures how far the criterion gets with perfect information.
  bool virtual_oracle = false;
  // Top-T, S+Q and full GD: each level's improvement and step from the curvature bound of the
  // block it sends, <g, q>^2 / (2 q^T M q) at step <g, q> / q^T M q with
  // M = 0.25 X~^T X~ / n + lambda I (which bounds the Hessian everywhere), in place of the
  // paper's 1/L; fixed T, dynamic and full GD get the same rule at their levels. On several
  // workers each applies its own step, or the smallest, or (sum_block_step) one for the sum.
  bool block_step = false;
  // With block_step on several workers: one step for the sum u = sum p_i q_i of what the workers
  // decode to, the minimiser of the descent lemma's bound on f along u,
  // gamma = sum p_i <g_i, u> / sum p_i u^T M_i u (M = sum p_i M_i). Each worker computes its two
  // scalars from u and its own rows and sends them in a message of their own (16 bytes, one more
  // packet per worker and round, counted); the workers still choose T alone. false: each worker's
  // vector scaled by its own step, or all by the smallest (per_worker_step). With EF21's state
  // (MethodSpec::ef21) also on one worker, u = sum p_i h_i being the states; cat (measured) then
  // maximises (1 + s_i) D(T) - lambda C(T), D(T) the round's decrease along the new state on one
  // worker, <g, h + Q>^2 / (2 (h + Q)^T M (h + Q)), and on several as ef21_block_rule says
  // (by default p_i D(u + Q(v_i)) at f's gradient taken as u + v_i); s_i as without the block step,
  // lambda the running measured decrease per unit of the squared gradient over the round's cost
  // (the scalars' messages counted), times the squared gradient now: on one worker (and for
  // ef21_block_oracle) ||grad f||^2, on several the last round's ||u||^2 in its place.
  bool sum_block_step = false;
  // With block_step: cat picks T by the paper's criterion (improvement at 1/L) and only the
  // step comes from the block bound; false: cat scans every level's block improvement.
  bool paper_selection = false;
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
