#include "training.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "common/compression/compressor.hpp"
#include "common/compression/error_feedback.hpp"
#include "common/ml/partition.hpp"
#include "common/tuning/tuner.hpp"
#include "common/util/rng.hpp"

namespace tern::bench::cat {

Shards makeShards(const Problem& problem, size_t workers, uint64_t seed, double dirichlet_alpha,
                  double volume_ratio) {
  Shards s;
  if (workers == 1) {
    s.data.push_back(problem.data);
    s.shares.push_back(1.0);
    return s;
  }
  ml::PartitionSpec spec;
  spec.seed = seed;
  spec.dirichlet_alpha = dirichlet_alpha;
  spec.volume_ratio = volume_ratio;
  const auto parts = ml::partition(problem.data.labels, problem.data.num_classes, workers, spec);
  size_t total = 0;
  for (const auto& rows : parts) total += rows.size();
  // The weighted local objectives add up to f only when every row belongs to some worker.
  if (total != problem.data.rows())
    throw std::runtime_error("partition left out " + std::to_string(problem.data.rows() - total) +
                             " rows");
  for (const auto& rows : parts) {
    s.data.push_back(problem.data.subset(rows));
    s.shares.push_back(static_cast<double>(rows.size()) / static_cast<double>(total));
  }
  return s;
}

costmodel::PacketCostModel packetModel(const Link& link) {
  return costmodel::packetModelOfLink(link.latency_seconds, link.rate_bits_per_second,
                                      link.packet_bytes);
}

namespace {

// What one worker keeps between rounds.
struct Worker {
  Worker(double p, const ml::Dataset* rows_of, std::unique_ptr<tuning::Tuner> t,
         compression::ErrorFeedback m, Rng coins, size_t d)
      : share(p), data(rows_of), tuner(std::move(t)), memory(std::move(m)), rng(coins), grad(d) {}

  double share = 0.0;  // p_i
  const ml::Dataset* data = nullptr;
  std::unique_ptr<tuning::Tuner> tuner;
  compression::ErrorFeedback memory;  // the compressor, with the residual when that is on
  Rng rng;                            // the compressor's coins
  std::vector<float> grad;
  compression::SparseGradient decoded;  // what the coordinator adds for this worker
  double step = 0.0;                    // the step its decision reported
  std::vector<size_t> rows;  // RunLimits::batch: the rows, the first `batch` drawn each round
  Rng batch_rng;
};

// One run of train(): the workers, the model and the totals on the wire.
class Run {
 public:
  Run(const Problem& problem, const Shards& shards, const MethodSpec& method, const Link& link,
      const RunLimits& limits, uint64_t seed);
  Trace go();

 private:
  double evaluate();
  bool recordAndContinue(double f, size_t round);
  tuning::TuningDecision choose(Worker& w, std::span<const float> v);
  void push(Worker& w, const tuning::TuningDecision& decision);
  void step();

  const Problem& problem_;
  const RunLimits& limits_;
  const size_t d_;
  const costmodel::PacketCostModel packet_;
  const costmodel::PayloadCostModel payload_;
  // Prices the codec's bytes (Compressor::encodedBytes), not the paper's T (ceil(log2 d) + 32)
  // bits: docs/cat.md, "Deviations from the paper".
  const costmodel::CostModel& tuner_cost_;
  const bool fresh_;  // cat prices every level on the worker's fresh gradient
  std::vector<Worker> workers_;
  std::vector<float> x_, update_;
  Trace trace_;
  double bits_ = 0, packets_ = 0, packet_cost_ = 0, selection_ = 0, levels_ = 0;
  size_t pushes_ = 0;
  double step_ = 0.0;  // the smallest step reported this round
};

Run::Run(const Problem& problem, const Shards& shards, const MethodSpec& method, const Link& link,
         const RunLimits& limits, uint64_t seed)
    : problem_(problem),
      limits_(limits),
      d_(problem.dim),
      packet_(packetModel(link)),
      payload_(),
      tuner_cost_(method.tuner_cost_model == "packet"
                      ? static_cast<const costmodel::CostModel&>(packet_)
                      : payload_),
      fresh_(method.fresh && method.error_feedback && method.tuner == "cat"),
      x_(d_, 0.0f),
      update_(d_) {
  tuning::TunerSpec tspec;
  tspec.kind = *tuning::tunerKindNamed(method.tuner);
  tspec.fixed_level = method.fixed_level;
  tspec.recompute_every = method.recompute_every;
  tspec.recompute_drift = method.recompute_drift;
  tspec.smoothness = problem.L;
  compression::CompressorSpec cspec;
  cspec.name = method.compressor;
  for (size_t i = 0; i < shards.data.size(); ++i) {
    Worker w(shards.shares[i], &shards.data[i], tuning::makeTuner(tspec),
             compression::ErrorFeedback(compression::makeCompressor(cspec), method.error_feedback),
             Rng(deriveSeed(seed, 1000 + i)), d_);
    if (limits.batch > 0) {
      const size_t n = w.data->rows();
      if (limits.batch > n)
        throw std::runtime_error("--batch " + std::to_string(limits.batch) +
                                 " exceeds a worker's " + std::to_string(n) + " rows");
      w.rows.resize(n);
      for (size_t r = 0; r < n; ++r) w.rows[r] = r;
      w.batch_rng = Rng(deriveSeed(seed, 2000 + i));
    }
    workers_.push_back(std::move(w));
  }
}

// f(x), the share-weighted sum of the local objectives, and every worker's gradient.
double Run::evaluate() {
  double f = 0.0;
  for (Worker& w : workers_) {
    if (limits_.batch == 0) {
      f += w.share * problem_.model->lossAndGradient(x_, *w.data, {}, w.grad);
      continue;
    }
    f += w.share * problem_.model->loss(x_, *w.data);
    // A partial Fisher-Yates shuffle: the first `batch` rows of a fresh permutation.
    for (size_t k = 0; k < limits_.batch; ++k) {
      std::uniform_int_distribution<size_t> pick(k, w.rows.size() - 1);
      std::swap(w.rows[k], w.rows[pick(w.batch_rng)]);
    }
    problem_.model->lossAndGradient(x_, *w.data, {w.rows.data(), limits_.batch}, w.grad);
  }
  return f;
}

// Appends the totals that reaching x_round took; false once the run is over.
bool Run::recordAndContinue(double f, size_t round) {
  trace_.f.push_back(f);
  trace_.bits.push_back(bits_);
  trace_.packets.push_back(packets_);
  trace_.packet_cost.push_back(packet_cost_);
  trace_.selection_seconds.push_back(selection_);
  if (!std::isfinite(f) || f > 10.0 * problem_.f0 + 1.0) {
    trace_.diverged = true;
    return false;
  }
  return round < limits_.max_rounds && f - problem_.fstar > limits_.stop_gap;
}

// The level: the tuner's, priced on the fresh gradient for the daemons' cat (fresh_), else on v.
tuning::TuningDecision Run::choose(Worker& w, std::span<const float> v) {
  const auto fresh = fresh_ ? std::span<const float>(w.grad) : std::span<const float>();
  return w.tuner->choose(v, 0, w.memory.inner(), tuner_cost_, -1.0, 0.0, tuning::kBestStep, fresh);
}

// Compresses g + e at the decided level and counts the push on the wire.
void Run::push(Worker& w, const tuning::TuningDecision& decision) {
  compression::Compressed c = w.memory.compressCorrected(decision.level, w.rng);
  const size_t bytes = c.bytes.size();
  bits_ += 8.0 * static_cast<double>(bytes);
  packets_ += static_cast<double>(packet_.packets(bytes));
  packet_cost_ += packet_.cost(bytes);
  levels_ += decision.level;
  ++pushes_;
  step_ = std::min(step_, decision.step);
  w.step = decision.step;
  w.decoded = std::move(c.decoded);
}

// Each worker's vector scaled by its own step (RunLimits::per_worker_step) or all by the
// smallest; the steps differ only for stochastic sparsification (top-T and S+Q report 1/L).
void Run::step() {
  for (const Worker& w : workers_) {
    const double s = limits_.per_worker_step ? w.step : step_;
    compression::addScaled(w.decoded, static_cast<float>(w.share * s), update_);
  }
  for (size_t j = 0; j < d_; ++j) x_[j] -= update_[j];
}

Trace Run::go() {
  for (size_t round = 0;; ++round) {
    const double f = evaluate();
    if (!recordAndContinue(f, round)) break;
    step_ = std::numeric_limits<double>::infinity();
    for (Worker& w : workers_) {
      const std::span<const float> v = w.memory.corrected(w.grad);
      const auto t0 = std::chrono::steady_clock::now();
      const tuning::TuningDecision decision = choose(w, v);
      selection_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      push(w, decision);
    }
    std::fill(update_.begin(), update_.end(), 0.0f);
    step();
  }
  trace_.mean_level = pushes_ ? levels_ / static_cast<double>(pushes_) : 0.0;
  return std::move(trace_);
}

}  // namespace

Trace train(const Problem& problem, const Shards& shards, const MethodSpec& method,
            const Link& link, const RunLimits& limits, uint64_t seed) {
  return Run(problem, shards, method, link, limits, seed).go();
}

}  // namespace tern::bench::cat
