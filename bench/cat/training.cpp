#include "training.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "block_step.hpp"
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

// Weight of the newest round in the running means (the measured price, EF21's flow).
constexpr double kMeanWeight = 0.1;
// The two scalars of the sum's block step, sent in a message of their own.
constexpr size_t kScalarBytes = 2 * sizeof(double);

// A running mean that takes the first value whole.
double blend(double mean, double fresh, bool have) {
  return have ? (1.0 - kMeanWeight) * mean + kMeanWeight * fresh : fresh;
}

// cat under EF21's state at step 1/L (docs/cat.md "EF21's state"): the level that maximises
// w improvement(T) - lambda C(T) for the difference v = g_i - h_i.
tuning::TuningDecision chooseLagrangian(std::span<const float> v, bool sign_scale, double L,
                                        double w, double lambda,
                                        const compression::Compressor& comp,
                                        const costmodel::CostModel& cost) {
  const auto d = static_cast<uint32_t>(v.size());
  const tuning::MagnitudeProfile p(v, d);
  const auto scheme = sign_scale ? tuning::Scheme::kSignScale : tuning::Scheme::kTopT;
  tuning::TuningDecision best{1u, 0.0, 0.0, 1.0 / L, true};
  double best_score = -1e300;
  for (uint32_t T = 1; T <= d; ++T) {
    const double gain = w * tuning::improvement(scheme, p, T, L);
    const double c = cost.cost(comp.encodedBytes(d, T));
    if (gain - lambda * c > best_score) {
      best_score = gain - lambda * c;
      best = {T, c, gain, tuning::step(scheme, p, T, L), true};
    }
  }
  return best;
}

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
  // EF21: the state h_i, the difference v_i = g_i - h_i, the running mean of the gradients
  // (RunLimits::ef21_momentum), and running means of the energy sent and left a round.
  std::vector<float> state, difference, momentum;
  double mean_sent = 0.0, mean_left = 0.0;
  bool have_flow = false;
  std::vector<size_t> rows;  // RunLimits::batch: the rows, the first `batch` drawn each round
  Rng batch_rng;
  Columns columns;  // the block step: its rows with a 1 appended

  // The rounds what a push leaves in the difference stays there (Little's law).
  double stay() const { return have_flow && mean_sent > 0.0 ? mean_left / mean_sent : 0.0; }
  void recordFlow(double sent_sq, double left_sq) {
    mean_sent = blend(mean_sent, sent_sq, have_flow);
    mean_left = blend(mean_left, left_sq, have_flow);
    have_flow = true;
  }
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
  void updatePrice(double f, size_t round);
  void sumStates();
  std::span<const float> vectorOf(Worker& w, size_t round, double& base);
  tuning::TuningDecision choose(Worker& w, std::span<const float> v, double base);
  void push(Worker& w, std::span<const float> v, const tuning::TuningDecision& decision);
  void chargeScalars();
  void stepAlongSum();
  void stepEach();

  const Problem& problem_;
  const RunLimits& limits_;
  const size_t d_;
  const costmodel::PacketCostModel packet_;
  const costmodel::PayloadCostModel payload_;
  // Prices the codec's bytes (Compressor::encodedBytes), not the paper's T (ceil(log2 d) + 32)
  // bits: docs/cat.md, "Deviations from the paper".
  const costmodel::CostModel& tuner_cost_;
  const bool ef21_;  // EF21's state; also the measured price of its cat
  const bool cat_, sign_scale_;
  const bool block_;             // RunLimits::block_step applies to this method
  const bool sum_step_;          // one block step for the sum
  const bool one_worker_state_;  // EF21 with the sum's step on one worker: priced per ||grad||^2
  const bool block_state_;       // EF21 with the sum's step on several workers
  std::vector<Worker> workers_;
  std::vector<float> x_, update_, sent_, start_sum_, taken_grad_;
  Trace trace_;
  double bits_ = 0, packets_ = 0, packet_cost_ = 0, selection_ = 0, levels_ = 0;
  size_t pushes_ = 0;
  double step_ = 0.0;  // the smallest step reported this round
  // The measured price: lambda, the last round's f and cost, running means of the decrease
  // and the cost, the last round's ||u||^2 and ||grad f||^2.
  double round_lambda_ = -1.0, round_cost_ = 0.0;
  double last_f_ = 0.0, last_cost_ = 0.0, mean_decrease_ = 0.0, mean_cost_ = 0.0;
  double last_u_sq_ = 0.0, gsq_prev_ = 0.0;
  bool have_ratio_ = false;
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
      ef21_(method.ef21 && method.error_feedback),
      cat_(method.tuner == "cat"),
      sign_scale_(method.compressor == "sq"),
      block_(limits.block_step &&
             (method.compressor == "topk" || method.compressor == "sq" || method.tuner == "full")),
      sum_step_(block_ && limits.sum_block_step && (shards.data.size() > 1 || ef21_)),
      one_worker_state_(ef21_ && sum_step_ && shards.data.size() == 1),
      block_state_(block_ && ef21_ && sum_step_ && shards.data.size() > 1),
      x_(d_, 0.0f),
      update_(d_),
      sent_(ef21_ ? d_ : 0),
      start_sum_(block_state_ ? d_ : 0),
      taken_grad_(block_state_ ? d_ : 0) {
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
             compression::ErrorFeedback(compression::makeCompressor(cspec),
                                        method.error_feedback && !ef21_),
             Rng(deriveSeed(seed, 1000 + i)), d_);
    if (ef21_) {
      w.state.assign(d_, 0.0f);
      w.difference.resize(d_);
      if (limits.ef21_momentum > 0.0) w.momentum.assign(d_, 0.0f);
    }
    if (limits.batch > 0) {
      const size_t n = w.data->rows();
      if (limits.batch > n)
        throw std::runtime_error("--batch " + std::to_string(limits.batch) +
                                 " exceeds a worker's " + std::to_string(n) + " rows");
      w.rows.resize(n);
      for (size_t r = 0; r < n; ++r) w.rows[r] = r;
      w.batch_rng = Rng(deriveSeed(seed, 2000 + i));
    }
    // Each worker prices with its own rows' M_i (its only view of the data's curvature).
    if (block_) w.columns = augmentedColumns(*w.data);
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

// EF21's price lambda: the running measured decrease of f per unit of cost. With the sum's
// block step it is measured per unit of the squared gradient at the round's start and priced
// at this round's (on several workers the last round's ||u||^2 stands in for it).
void Run::updatePrice(double f, size_t round) {
  double gsq_now = 0.0;
  if (one_worker_state_) {
    std::vector<double> gsum(d_, 0.0);
    for (const Worker& w : workers_)
      for (size_t j = 0; j < d_; ++j) gsum[j] += w.share * w.grad[j];
    for (double a : gsum) gsq_now += a * a;
  }
  if (ef21_ && round > 0 && last_cost_ > 0.0) {
    const bool per_gradient = one_worker_state_ && gsq_prev_ > 0.0;
    const bool per_direction = !one_worker_state_ && sum_step_ && last_u_sq_ > 0.0;
    const double scale = per_gradient ? gsq_prev_ : per_direction ? last_u_sq_ : 1.0;
    const double now = per_gradient ? gsq_now : scale;
    mean_decrease_ = blend(mean_decrease_, (last_f_ - f) / scale, have_ratio_);
    mean_cost_ = blend(mean_cost_, last_cost_, have_ratio_);
    have_ratio_ = true;
    round_lambda_ = mean_decrease_ > 0.0 ? mean_decrease_ / mean_cost_ * now : -1.0;
  }
  gsq_prev_ = gsq_now;
  last_f_ = f;
}

// u = sum p_k h_k at the round's start, the direction every worker is told.
void Run::sumStates() {
  std::fill(start_sum_.begin(), start_sum_.end(), 0.0f);
  for (const Worker& w : workers_) {
    const auto p = static_cast<float>(w.share);
    for (size_t j = 0; j < d_; ++j) start_sum_[j] += p * w.state[j];
  }
}

// The vector the worker compresses: g + e, or with EF21 the difference (m or g) - h, whose
// state's own decrease (||g||^2 - ||v||^2) / 2L goes to `base`.
std::span<const float> Run::vectorOf(Worker& w, size_t round, double& base) {
  if (!ef21_) return w.memory.corrected(w.grad);
  if (!w.momentum.empty()) {
    const auto eta = static_cast<float>(round == 0 ? 1.0 : limits_.ef21_momentum);
    for (size_t j = 0; j < d_; ++j) w.momentum[j] = (1.0f - eta) * w.momentum[j] + eta * w.grad[j];
  }
  const std::vector<float>& tracked = w.momentum.empty() ? w.grad : w.momentum;
  double gs = 0.0, ds = 0.0;
  for (size_t j = 0; j < d_; ++j) {
    w.difference[j] = tracked[j] - w.state[j];
    gs += static_cast<double>(w.grad[j]) * w.grad[j];
    ds += static_cast<double>(w.difference[j]) * w.difference[j];
  }
  base = std::max(0.0, (gs - ds) / (2.0 * problem_.L));
  return w.difference;
}

// The level: EF21's measured criterion once a price exists, else the block step's scan, else
// the tuner (the paper's criterion, as the daemons run it).
tuning::TuningDecision Run::choose(Worker& w, std::span<const float> v, double base) {
  const compression::Compressor& comp = w.memory.inner();
  if (ef21_ && cat_ && round_lambda_ > 0.0) {
    const double stay = w.stay();
    if (block_state_) {
      // As if every worker's difference were its own: f's gradient u + v_i, its share p_i.
      for (size_t j = 0; j < d_; ++j) taken_grad_[j] = start_sum_[j] + v[j];
      return chooseBlockState(v, taken_grad_, start_sum_, w.columns, problem_.l2, sign_scale_,
                              w.share * (1.0 + stay), round_lambda_, comp, tuner_cost_);
    }
    if (sum_step_)
      return chooseBlockState(v, w.grad, w.state, w.columns, problem_.l2, sign_scale_, 1.0 + stay,
                              round_lambda_, comp, tuner_cost_);
    return chooseLagrangian(v, sign_scale_, problem_.L, w.share * (1.0 + stay), round_lambda_, comp,
                            tuner_cost_);
  }
  if (block_) {
    // cat scans every level; the others pick theirs as usual and get its block step.
    const uint32_t level = cat_ ? 0 : w.tuner->choose(v, 0, comp, tuner_cost_, -1.0, base).level;
    return chooseBlock(v, w.grad, w.columns, problem_.l2, sign_scale_, level, comp, tuner_cost_);
  }
  return w.tuner->choose(v, 0, comp, tuner_cost_, -1.0, base);
}

// Compresses at the decided level, counts the push on the wire and, with EF21, moves the state.
void Run::push(Worker& w, std::span<const float> v, const tuning::TuningDecision& decision) {
  compression::Compressed c = ef21_ ? w.memory.compress(v, decision.level, w.rng)
                                    : w.memory.compressCorrected(decision.level, w.rng);
  const size_t bytes = c.bytes.size();
  bits_ += 8.0 * static_cast<double>(bytes);
  packets_ += static_cast<double>(packet_.packets(bytes));
  packet_cost_ += packet_.cost(bytes);
  levels_ += decision.level;
  ++pushes_;
  step_ = std::min(step_, decision.step);
  w.step = decision.step;
  if (!ef21_) {
    w.decoded = std::move(c.decoded);
    return;
  }
  std::fill(sent_.begin(), sent_.end(), 0.0f);
  compression::addScaled(c.decoded, 1.0f, sent_);
  double sent_sq = 0.0, left_sq = 0.0;
  for (size_t j = 0; j < d_; ++j) {
    sent_sq += static_cast<double>(sent_[j]) * sent_[j];
    const double r = static_cast<double>(v[j]) - sent_[j];
    left_sq += r * r;
  }
  w.recordFlow(sent_sq, left_sq);
  compression::addScaled(c.decoded, 1.0f, w.state);
  w.decoded = {static_cast<uint32_t>(d_), {}, w.state};
}

// One scalar message a worker sends after the push, for the sum's block step.
void Run::chargeScalars() {
  bits_ += 8.0 * kScalarBytes;
  packets_ += static_cast<double>(packet_.packets(kScalarBytes));
  packet_cost_ += packet_.cost(kScalarBytes);
  // What the round cost in full is the measured price's denominator.
  if (ef21_) last_cost_ += tuner_cost_.cost(kScalarBytes);
}

// One block step for the sum u = sum p_i q_i: gamma = sum p_i <g_i, u> / sum p_i u^T M_i u.
void Run::stepAlongSum() {
  for (const Worker& w : workers_)
    compression::addScaled(w.decoded, static_cast<float>(w.share), update_);
  const Eigen::VectorXd u =
      Eigen::Map<const Eigen::VectorXf>(update_.data(), Eigen::Index(d_)).cast<double>();
  const Eigen::Index bias = Eigen::Index(d_) - 1;
  const double w2 = u.head(bias).squaredNorm();
  double along = 0.0, curvature = 0.0;
  for (const Worker& w : workers_) {
    const Eigen::VectorXd Xu = w.columns * u;
    const double gu =
        Eigen::Map<const Eigen::VectorXf>(w.grad.data(), Eigen::Index(d_)).cast<double>().dot(u);
    along += w.share * gu;
    curvature += w.share * (0.25 * Xu.squaredNorm() / double(w.columns.rows()) + problem_.l2 * w2);
    chargeScalars();
  }
  last_u_sq_ = u.squaredNorm();
  // <g, u> <= 0: u is no descent direction for the sum; the round moves nothing.
  const double gamma = along > 0.0 && curvature > 0.0 ? along / curvature : 0.0;
  for (size_t j = 0; j < d_; ++j) x_[j] -= static_cast<float>(gamma * update_[j]);
}

// Each worker's vector scaled by its own step (RunLimits::per_worker_step) or all by the
// smallest; the steps differ only for stochastic sparsification (top-T and S+Q report 1/L).
void Run::stepEach() {
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
    updatePrice(f, round);
    if (block_state_) sumStates();
    step_ = std::numeric_limits<double>::infinity();
    round_cost_ = 0.0;
    for (Worker& w : workers_) {
      double base = 0.0;
      const std::span<const float> v = vectorOf(w, round, base);
      const auto t0 = std::chrono::steady_clock::now();
      const tuning::TuningDecision decision = choose(w, v, base);
      if (ef21_) round_cost_ += decision.predicted_cost;
      selection_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      push(w, v, decision);
    }
    last_cost_ = round_cost_;
    std::fill(update_.begin(), update_.end(), 0.0f);
    if (sum_step_)
      stepAlongSum();
    else
      stepEach();
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
