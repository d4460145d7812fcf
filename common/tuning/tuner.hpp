#pragma once
// Tuners decide each push's compression level T under the coordinator's cap (docs/cat.md, method):
//  - cat-paper: T* = argmax improvement(T) / C(T) (eqs. 9, 12, 15 over the worker's cost model)
//             on the vector sent from (gradient plus residual), recomputed every
//             `recompute_every` calls and reused in between (the hybrid
//             heuristic), or earlier when the vector's shape drifts (recompute_drift) or the
//             cost model's does (C(T*) or C(cap) against C(1) moved by 25%: a link fitted); in
//             between, S+Q (without a credit limit or base improvement) picks the best of its
//             vector's magnitude bins and packet-filling levels (no sort) instead of reusing T*;
//  - cat:     the same search on the fresh gradient alone when the caller gives it (tern's, for
//             error feedback: what the residual holds was priced when it arrived and leaves
//             later, not lost; docs/cat.md, "The tuner in the daemons"); the level then applies
//             to gradient plus residual. Without it, cat-paper;
//  - fixed:   one T chosen before training (static tuning);
//  - dynamic: Alistarh et al.'s S+Q rule as in POLO: the smallest T with S1(T) >= ||g||_2,
//             T <= ceil(sqrt(d)); cost-agnostic;
//  - full:    T = d (full gradient), or the cap.
// Every decision carries the step the improvement assumes and the predicted cost and improvement.
// Given the step the receiver applies (the coordinator's learning rate), every tuner predicts the
// descent lemma's bound at that step (improvement.hpp) and cat maximises it per cost; where no
// level earns a decrease there, cat sends the least harm (selection.hpp).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/tuning/improvement.hpp"
#include "common/tuning/magnitude_profile.hpp"
#include "common/tuning/tuner_kind.hpp"

namespace tern::tuning {

struct TuningDecision {
  uint32_t level = 1;           // T handed to the compressor
  double predicted_cost = 0.0;  // C(encodedBytes(d, T)) in the cost model's unit
  // Guaranteed (expected, for stochastic) decrease of f at `step`; negative when the step can
  // overshoot at every level (the least harm was chosen).
  double predicted_improvement = 0.0;
  double step = 0.0;  // step the prediction assumes for the decoded vector
  // False between the hybrid's recomputes: a reused top-T or S+Q level then carries the
  // improvement predicted at the last recompute (cost and step are current; stochastic's
  // improvement is current too), and S+Q's binned level its own exact improvement.
  bool recomputed = true;
};

struct TunerSpec {
  TunerKind kind = TunerKind::kCat;
  uint32_t fixed_level = 0;      // fixed: T (0 = the coordinator's cap)
  uint32_t recompute_every = 1;  // cat: S of the hybrid heuristic (1 = every call)
  // cat with S > 1: recompute before S calls have passed once the vector's effective sparsity
  // ||v||_1^2 / ||v||_2^2 has moved by more than this factor since T* was computed (an O(d)
  // pass per call, no sorting); 0 = off: the paper's plain hybrid, except for S+Q's binned
  // levels under a cost without packets. Both deviate from the paper's hybrid: docs/cat.md,
  // "Deviations from the paper", says how.
  double recompute_drift = 1.25;
  double smoothness = 1.0;  // L of the objective
};

class Tuner {
 public:
  virtual ~Tuner() = default;
  virtual std::string name() const = 0;
  // v = gradient (+ error-feedback residual); cap = the coordinator's cap, never exceeded
  // (0 = no cap). Compressors without a level (identity, fp16, qsgd) get T = min(d, cap) and
  // the full-gradient improvement ||v||^2 / (2L), exact for identity.
  // gradient_sq_norm: ||g||^2 of the gradient alone, without the residual (< 0 = unknown, the
  // paper's CAT). When given, cat credits no level with more than ||g||^2 / (2L): by the
  // descent lemma no step along any vector is guaranteed more than the gradient step's
  // decrease, while with error feedback S2(T) of g + e can exceed ||g||^2. Without error
  // feedback v = g and the cap never binds. The daemons and the benchmark do not pass it: it made
  // CAT with error feedback cheaper under payload but dearer under packets and stalled it on 4
  // workers (docs/research/cat.md).
  // base_improvement: a decrease the step earns whatever T is sent (>= 0; 0 = the paper's CAT).
  // cat maximises (base_improvement + improvement(T)) / C(T) and reports the sum. With learned
  // shifts h (DIANA: the worker compresses v = g - h, the receiver applies h with step 1/L and
  // the unbiased estimate of v with the step omega/L), the descent lemma gives exactly
  // (||g||^2 - ||v||^2)/(2L) + omega ||v||^2/(2L): the first term is the base (no caller passes
  // one now: the memories that did are in docs/research/cat.md). Other tuners ignore it.
  // step: the step the receiver applies to the decoded vector (kBestStep = 0: each compressor's
  // best step, the paper's CAT; else finite and > 0). cat recomputes T* when it changes.
  // fresh: the gradient alone when v carries an error-feedback residual (empty = v is all
  // fresh). cat prices every level on it, and its decision's improvement is fresh's; the level
  // is for v. cat-paper and the other tuners ignore it.
  // Throws std::invalid_argument on an empty v, a fresh of another size, or a negative or
  // non-finite step.
  virtual TuningDecision choose(std::span<const float> v, uint32_t cap,
                                const compression::Compressor& comp,
                                const costmodel::CostModel& cost, double gradient_sq_norm = -1.0,
                                double base_improvement = 0.0, double step = kBestStep,
                                std::span<const float> fresh = {}) = 0;
};

// Throws std::invalid_argument on an unknown name, smoothness <= 0 or recompute_every == 0.
std::unique_ptr<Tuner> makeTuner(const TunerSpec& spec);
std::vector<std::string> tunerNames();

// The dynamic rule's T over levels [1, max_level] (max_level <= p.sortedCount()):
// the smallest T with S1(T) >= ||g||_2, or max_level when none is.
uint32_t dynamicLevel(const MagnitudeProfile& p, uint32_t max_level);
// POLO's bound on the dynamic rule's T: ceil(sqrt(d)).
uint32_t dynamicMaxLevel(size_t dim);

}  // namespace tern::tuning
