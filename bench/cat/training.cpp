#include "training.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

#include "common/compression/compressor.hpp"
#include "common/compression/error_feedback.hpp"
#include "common/ml/partition.hpp"
#include "common/tuning/noise_price.hpp"
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

// Weight of the newest round in the running estimate of G (RunLimits::aggregate_step).
constexpr double kEstimateWeight = 0.1;

// cat for stochastic sparsification under a noise price: a scan of every T. Alone (G < 0) the
// best step for Q_T(v) is S / (L S + P(T)), S = ||v||^2, and the decrease it guarantees
// S^2 / (2 (L S + P(T))) (the paper's omega(T) S / 2L when every coordinate is priced at L).
// Under the aggregate step the round's decrease is G^2 / (2 (L G + V)) with V = sum_j p_j^2 P_j;
// worker i takes its share p_i of it as if every worker's noise were its own, V = s P_i(T).
// own_share (each worker applies its own step gamma = S / (L S + P)): worker i's part of the
// bound on f's decrease, taking <g, v_i> and the other workers' steps as G and gamma:
// p_i gamma G - (L / 2) p_i gamma^2 G - p_i^2 gamma^2 P / 2 (one worker: S^2 / (2 (L S + P))).
tuning::TuningDecision choosePriced(const tuning::NoisePrice& price, double S, double base,
                                    double share, double share_sq, double G, bool own_share,
                                    double L, uint32_t d, const compression::Compressor& comp,
                                    const costmodel::CostModel& cost, double lambda = -1.0) {
  tuning::TuningDecision best;
  double best_ratio = -std::numeric_limits<double>::infinity();
  for (uint32_t T = 1; T <= d; ++T) {
    const double P = price.at(T).priced;
    const double gamma = S / (L * S + P);
    double imp = base + S * S / (2.0 * (L * S + P));
    if (G > 0.0 && own_share)
      imp = share * gamma * G * (1.0 - 0.5 * L * gamma) - 0.5 * share * share * gamma * gamma * P;
    else if (G > 0.0)
      imp = share * G * G / (2.0 * (L * G + share_sq * P));
    const double c = cost.cost(comp.encodedBytes(d, T));
    const double score = lambda > 0.0 ? imp - lambda * c : imp / c;
    if (score > best_ratio) {
      best_ratio = score;
      best = {T, c, imp, S / (L * S + P), true};
    }
  }
  return best;
}

// The pooled scan: argmin_T noise(T) + lambda C(T), noise(T) the weighted noise term of worker i
// at level T. The reported improvement is the noise term's saving against T = 1 (the round's
// ratio is not taken from it under measured_ratio).
template <class Noise>
tuning::TuningDecision scanPooled(const Noise& noise_at, double gamma, double lambda, uint32_t d,
                                  const compression::Compressor& comp,
                                  const costmodel::CostModel& cost) {
  tuning::TuningDecision best;
  double best_score = -std::numeric_limits<double>::infinity();
  const double worst = noise_at(1);
  for (uint32_t T = 1; T <= d; ++T) {
    const double noise = noise_at(T);
    const double c = cost.cost(comp.encodedBytes(d, T));
    const double score = -noise - lambda * c;
    if (score > best_score) {
      best_score = score;
      best = {T, c, worst - noise, gamma, true};
    }
  }
  return best;
}

// cat under RunLimits::pooled_step: with one step gamma for the sum, the round's bound depends on
// worker i's level only through its noise, gamma^2 p_i^2 P_i(T) / 2; Dinkelbach's split of the
// round's ratio with lambda gives argmin_T gamma^2 p_i^2 P_i(T) / 2 + lambda C(T).
tuning::TuningDecision choosePooled(const tuning::NoisePrice& price, double gamma, double share,
                                    double lambda, uint32_t d, const compression::Compressor& comp,
                                    const costmodel::CostModel& cost, double noise_scale = 1.0) {
  const double w = 0.5 * gamma * gamma * share * share * noise_scale;
  return scanPooled([&](uint32_t T) { return w * price.at(T).priced; }, gamma, lambda, d, comp,
                    cost);
}

// cat under RunLimits::horizon: argmin_T gamma^2 p_i^2 (P_W(T) + k P_H(T)) / 2 + lambda C(T)
// with P_W the noise priced at the horizon's W, P_H at the price the pooled step takes, and
// k = 2 h_F / sw the value of the longer step less noise buys (0 without step_value).
tuning::TuningDecision chooseHorizon(const tuning::NoisePrice& horizon,
                                     const tuning::NoisePrice& step_price, double k, double gamma,
                                     double share, double lambda, uint32_t d,
                                     const compression::Compressor& comp,
                                     const costmodel::CostModel& cost) {
  const double w = 0.5 * gamma * gamma * share * share;
  return scanPooled(
      [&](uint32_t T) { return w * (horizon.at(T).priced + k * step_price.at(T).priced); }, gamma,
      lambda, d, comp, cost);
}

// sigma'(z) = sigma(z) (1 - sigma(z)): a row's weight in the logistic loss's Hessian.
double sigmoidSlope(double z) {
  const double p = 1.0 / (1.0 + std::exp(-z));
  return p * (1.0 - p);
}

// cat with error feedback under RunLimits::virtual_credit: a scan of every T. The residual's
// e_T^T H e_T goes through the data (H = X~^T D X~ / n + lambda I at x, D = sigma'(z)), with
// X~ e_T kept as coordinates join: O(n) per level. With `others` (RunLimits::virtual_oracle)
// the residual priced is the sum's, others + w e_T, and the credit is w times the sum's descent.
tuning::TuningDecision chooseVirtual(std::span<const float> v, std::span<const float> g,
                                     const Eigen::MatrixXd& X, std::span<const float> x, double l2,
                                     double L, bool sign_scale, const compression::Compressor& comp,
                                     const costmodel::CostModel& cost,
                                     std::span<const float> others = {}, double w = 1.0,
                                     double lambda = -1.0) {
  const auto d = static_cast<uint32_t>(v.size());
  const Eigen::Index n = X.rows(), f = X.cols() - 1;
  Eigen::VectorXd xx(d), vv(d), gg(d);
  for (uint32_t j = 0; j < d; ++j) {
    xx[j] = x[j];
    vv[j] = v[j];
    gg[j] = g[j];
  }
  const Eigen::VectorXd z = X * xx;
  Eigen::VectorXd D(n);
  for (Eigen::Index i = 0; i < n; ++i) D[i] = sigmoidSlope(z[i]) / double(n);
  auto wnorm = [&](const Eigen::VectorXd& u) { return u.head(f).squaredNorm(); };
  const Eigen::VectorXd Xg = X * gg;
  const double gHg = (D.array() * Xg.array().square()).sum() + l2 * wnorm(gg);
  Eigen::VectorXd Xv = w * (X * vv);
  Eigen::VectorXd E0 = Eigen::VectorXd::Zero(d);
  for (size_t j = 0; j < others.size(); ++j) E0[j] = others[j];
  Xv += X * E0;
  const double e0w = wnorm(E0), e0v = E0.head(f).dot(vv.head(f));
  double e0q = 0.0;
  std::vector<uint32_t> order(d);
  for (uint32_t j = 0; j < d; ++j) order[j] = j;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  Eigen::VectorXd Xq = Eigen::VectorXd::Zero(n);
  const double g2 = gg.squaredNorm();
  double vw2 = wnorm(vv), qv = 0.0, qq = 0.0, s1 = 0.0;
  tuning::TuningDecision best{1, 0.0, -1e300, 1.0 / L, true};
  double best_ratio = -1e300, best_credit = -1e300;
  tuning::TuningDecision best_by_credit = best;
  for (uint32_t T = 1; T <= d; ++T) {
    const uint32_t j = order[T - 1];
    const double a = sign_scale ? (v[j] > 0 ? 1.0 : v[j] < 0 ? -1.0 : 0.0) : double(v[j]);
    s1 += std::fabs(double(v[j]));
    Xq += a * X.col(j);
    if (j < uint32_t(f)) {
      qv += a * v[j];
      qq += a * a;
      e0q += a * E0[j];
    }
    const double sc = sign_scale ? s1 / T : 1.0;
    const double ew2 = std::max(
        0.0, e0w + 2.0 * w * (e0v - sc * e0q) + w * w * (vw2 - 2.0 * sc * qv + sc * sc * qq));
    const double eHe = (D.array() * (Xv - w * sc * Xq).array().square()).sum() + l2 * ew2;
    const double credit = w * (g2 / (2.0 * L) - std::sqrt(eHe * gHg) / (L * L));
    const double c = cost.cost(comp.encodedBytes(d, T));
    if (credit > best_credit) {
      best_credit = credit;
      best_by_credit = {T, c, credit, 1.0 / L, true};
    }
    const double score = lambda > 0.0 ? credit - lambda * c : credit / c;
    if (credit > 0.0 && score > best_ratio) {
      best_ratio = score;
      best = {T, c, credit, 1.0 / L, true};
    }
  }
  return best_ratio > -1e300 ? best : best_by_credit;
}

// cat with EF21's memory (MethodSpec::ef21, top-T and S+Q): the level that
// maximises w * improvement(T) - lambda * C(T) for the difference v = g_i - h_i, lambda the
// running measured decrease of f per unit of cost, w the weight of this push's improvement.
// With `skip`, level 0 (no push: the state stands for the worker this round) is a choice too,
// worth nothing and costing nothing.
tuning::TuningDecision chooseLagrangian(std::span<const float> v, bool sign_scale, double L,
                                        double w, double lambda,
                                        const compression::Compressor& comp,
                                        const costmodel::CostModel& cost, bool skip) {
  const auto d = static_cast<uint32_t>(v.size());
  const tuning::MagnitudeProfile p(v, d);
  const auto scheme = sign_scale ? tuning::Scheme::kSignScale : tuning::Scheme::kTopT;
  tuning::TuningDecision best{skip ? 0u : 1u, 0.0, 0.0, 1.0 / L, true};
  double best_score = skip ? 0.0 : -1e300;
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

// Dense rows with a 1 appended (the bias), in double.
Eigen::MatrixXd denseWithBias(const ml::DenseMatrix& X) {
  Eigen::MatrixXd A(X.rows(), X.cols() + 1);
  A.leftCols(X.cols()) = X.cast<double>();
  A.col(X.cols()).setOnes();
  return A;
}

// The rows with a 1 appended (the bias), column-major: a coordinate's column is a contiguous run.
using Columns = Eigen::SparseMatrix<double, Eigen::ColMajor, int64_t>;
Columns augmentedColumns(const ml::Dataset& data) {
  std::vector<Eigen::Triplet<double, int64_t>> t;
  const auto n = int64_t(data.rows());
  const auto f = int64_t(data.features());
  if (data.is_sparse) {
    for (int64_t r = 0; r < n; ++r)
      for (ml::SparseMatrix::InnerIterator it(data.sparse, r); it; ++it)
        t.emplace_back(r, int64_t(it.col()), double(it.value()));
  } else {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < f; ++c)
        if (data.dense(r, c) != 0.0f) t.emplace_back(r, c, double(data.dense(r, c)));
  }
  for (int64_t r = 0; r < n; ++r) t.emplace_back(r, f, 1.0);
  Columns X(n, f + 1);
  X.setFromTriplets(t.begin(), t.end());
  return X;
}

// The levels of a block scan, one coordinate at a time by descending |v| (ties by index): the
// direction q of the level (top-T: v on the kept set; S+Q: its signs there) and what its
// curvature needs, with X~ q kept as coordinates join (one column each, so a scan of every level
// costs one pass over the rows). Only the first `last` coordinates are ordered.
class BlockScan {
 public:
  BlockScan(std::span<const float> v, std::span<const float> grad, const Columns& X,
            bool sign_scale, uint32_t last)
      : v_(v),
        grad_(grad),
        X_(X),
        sign_scale_(sign_scale),
        order_(v.size()),
        Xq_(Eigen::VectorXd::Zero(X.rows())),
        bias_(uint32_t(X.cols() - 1)) {
    for (uint32_t j = 0; j < order_.size(); ++j) order_[j] = j;
    auto larger = [&](uint32_t a, uint32_t b) {
      const float x = std::fabs(v[a]), y = std::fabs(v[b]);
      return x > y || (x == y && a < b);
    };
    if (last < order_.size())
      std::nth_element(order_.begin(), order_.begin() + last, order_.end(), larger);
    std::sort(order_.begin(), order_.begin() + last, larger);
  }
  // Adds the T-th coordinate (T counting from 1) and returns it; with `with`, also adds a times
  // <X~_j, with> to *with_dot.
  uint32_t add(uint32_t T, const Eigen::VectorXd* with = nullptr, double* with_dot = nullptr) {
    const uint32_t j = order_[T - 1];
    const double g = v_[j];
    a = sign_scale_ ? (g > 0 ? 1.0 : g < 0 ? -1.0 : 0.0) : g;
    s1 += std::fabs(g);
    gq += a * double(grad_[j]);
    double dot = 0.0, col2 = 0.0, other = 0.0;
    for (Columns::InnerIterator it(X_, j); it; ++it) {
      dot += Xq_[it.index()] * it.value();
      col2 += it.value() * it.value();
      if (with) other += (*with)[it.index()] * it.value();
    }
    xq2 += 2.0 * a * dot + a * a * col2;
    if (with) *with_dot += a * other;
    for (Columns::InnerIterator it(X_, j); it; ++it) Xq_[it.index()] += a * it.value();
    if (j != bias_) qq += a * a;
    return j;
  }
  double a = 0.0;    // the last coordinate's entry in q
  double s1 = 0.0;   // sum |v_j| over the kept set
  double gq = 0.0;   // <grad, q>
  double xq2 = 0.0;  // ||X~ q||^2
  double qq = 0.0;   // ||q||^2 without the bias (unpenalised)

 private:
  std::span<const float> v_, grad_;
  const Columns& X_;
  bool sign_scale_;
  std::vector<uint32_t> order_;
  Eigen::VectorXd Xq_;
  uint32_t bias_;
};

// RunLimits::block_step: the level's improvement and step from q^T M q of the block it sends,
// M = 0.25 X~^T X~ / n + lambda I (bias unpenalised), which bounds the Hessian everywhere. For
// the direction q the compressor decodes to (top-T: g on the top-T set; S+Q: the signs there,
// scaled by S1 / T; everything for full GD) the descent lemma gives the decrease
// <g, q>^2 / (2 q^T M q) at the step <g, q> / (q^T M q). `fixed_level` > 0 evaluates that level
// only; 0 picks the best ratio to C(T) over every level (cat), or, with `lambda` > 0, the level
// that maximises w * improvement(T) - lambda * C(T).
tuning::TuningDecision chooseBlock(std::span<const float> v, std::span<const float> grad,
                                   const Columns& X, double l2, bool sign_scale,
                                   uint32_t fixed_level, const compression::Compressor& comp,
                                   const costmodel::CostModel& cost, double w = 1.0,
                                   double lambda = -1.0) {
  const auto d = static_cast<uint32_t>(v.size());
  const double n = double(X.rows());
  const uint32_t last = fixed_level > 0 ? std::min(fixed_level, d) : d;
  BlockScan scan(v, grad, X, sign_scale, last);
  tuning::TuningDecision best{1, 0.0, 0.0, 0.0, true};
  double best_ratio = lambda > 0.0 ? -1e300 : -1.0;
  for (uint32_t T = 1; T <= last; ++T) {
    scan.add(T);
    if (fixed_level > 0 && T < last) continue;
    const double gq = scan.gq;
    const double quad = 0.25 * std::max(scan.xq2, 0.0) / n + l2 * scan.qq;  // q^T M q
    // <g, q> <= 0 (with error feedback the residual can outweigh the gradient): no descent.
    const double imp = quad > 0.0 && gq > 0.0 ? gq * gq / (2.0 * quad) : 0.0;
    // The compressor decodes S+Q to (S1 / T) * signs: the step on what it decodes.
    const double step = imp > 0.0 ? (gq / quad) / (sign_scale ? scan.s1 / T : 1.0) : 0.0;
    const double c = cost.cost(comp.encodedBytes(d, T));
    const double score = lambda > 0.0 ? w * imp - lambda * c : imp / c;
    if (score > best_ratio) {
      best_ratio = score;
      best = {T, c, imp, step, true};
    }
  }
  return best;
}

// cat with EF21's state and the block step (RunLimits::sum_block_step; on several workers as
// RunLimits::ef21_block_rule or ef21_block_oracle set `grad`, `state` and `part`): the level
// that maximises w * D(h + Q_T(v)) - lambda * C(T), where D(u) = <g, u>^2 / (2 u^T M u) is the
// decrease along the new state u at the best step (the descent lemma with the data's curvature
// bound M; 0 where u is no descent direction) and v = g - h the difference the worker
// compresses. X~ h is formed once, so a scan of every level costs two passes over the rows.
// With `part`, u = h + part Q_T(v) (RunLimits::ef21_block_oracle: h the rest of the sum, part
// the worker's share).
tuning::TuningDecision chooseBlockState(std::span<const float> v, std::span<const float> grad,
                                        std::span<const float> state, const Columns& X, double l2,
                                        bool sign_scale, double w, double lambda,
                                        const compression::Compressor& comp,
                                        const costmodel::CostModel& cost, double part = 1.0) {
  const auto d = static_cast<uint32_t>(v.size());
  const double n = double(X.rows());
  const auto bias = uint32_t(X.cols() - 1);
  const Eigen::VectorXd h =
      Eigen::Map<const Eigen::VectorXf>(state.data(), Eigen::Index(d)).cast<double>();
  const Eigen::VectorXd Xh = X * h;
  const double xh2 = Xh.squaredNorm();
  double gh = 0.0, hh = 0.0;
  for (uint32_t j = 0; j < d; ++j) {
    gh += double(grad[j]) * h[j];
    if (j != bias) hh += h[j] * h[j];
  }
  BlockScan scan(v, grad, X, sign_scale, d);
  double xhq = 0.0, hq = 0.0;  // <X~ h, X~ q> and <h, q> without the bias
  tuning::TuningDecision best{1, 0.0, 0.0, 0.0, true};
  double best_score = -1e300;
  for (uint32_t T = 1; T <= d; ++T) {
    const uint32_t j = scan.add(T, &Xh, &xhq);
    if (j != bias) hq += scan.a * h[j];
    // u = h + c q, c the scale the compressor decodes q with (times `part`).
    const double c = part * (sign_scale ? scan.s1 / T : 1.0);
    const double along = gh + c * scan.gq;
    const double quad = 0.25 * std::max(xh2 + 2.0 * c * xhq + c * c * scan.xq2, 0.0) / n +
                        l2 * (hh + 2.0 * c * hq + c * c * scan.qq);
    const double decrease = quad > 0.0 && along > 0.0 ? along * along / (2.0 * quad) : 0.0;
    const double price = cost.cost(comp.encodedBytes(d, T));
    const double score = w * decrease - lambda * price;
    if (score > best_score) {
      best_score = score;
      best = {T, price, decrease, 0.0, true};
    }
  }
  return best;
}

}  // namespace

Trace train(const Problem& problem, const Shards& shards, const MethodSpec& method,
            const Link& link, const RunLimits& limits, uint64_t seed) {
  const size_t workers = shards.data.size();
  const size_t d = problem.dim;
  const costmodel::PacketCostModel packet = packetModel(link);
  const costmodel::PayloadCostModel payload;
  const costmodel::CostModel& tuner_cost = method.tuner_cost_model == "packet"
                                               ? static_cast<const costmodel::CostModel&>(packet)
                                               : payload;

  tuning::TunerSpec tspec;
  tspec.name = method.tuner;
  tspec.fixed_level = method.fixed_level;
  tspec.recompute_every = method.recompute_every;
  tspec.recompute_drift = method.recompute_drift;
  tspec.smoothness = problem.L;
  compression::CompressorSpec cspec;
  cspec.name = method.compressor;

  // MethodSpec::ef21: each worker's state h_i and the difference it compresses.
  const bool ef21 = method.ef21 && method.error_feedback;
  // The running measured decrease of f per unit of cost (RunLimits::measured_ratio), also the
  // price of EF21's cat.
  const bool measured = limits.measured_ratio || (ef21 && !limits.ef21_ratio);
  std::vector<std::vector<float>> states(ef21 ? workers : 0, std::vector<float>(d, 0.0f));
  std::vector<std::vector<float>> differences(ef21 ? workers : 0, std::vector<float>(d));
  // RunLimits::ef21_momentum: each worker's running mean of its gradients.
  std::vector<std::vector<float>> momenta(ef21 && limits.ef21_momentum > 0.0 ? workers : 0,
                                          std::vector<float>(d, 0.0f));
  // With EF21: running means of each worker's energy sent and left a round.
  std::vector<double> mean_sent(workers, 0.0), mean_left(workers, 0.0);
  std::vector<bool> have_flow(workers, false);
  std::vector<float> sent(ef21 ? d : 0);
  std::vector<std::unique_ptr<tuning::Tuner>> tuners;
  std::vector<compression::ErrorFeedback> memories;
  std::vector<Rng> rngs;
  for (size_t i = 0; i < workers; ++i) {
    tuners.push_back(tuning::makeTuner(tspec));
    memories.emplace_back(compression::makeCompressor(cspec), method.error_feedback && !ef21);
    rngs.emplace_back(deriveSeed(seed, 1000 + i));
  }

  std::vector<float> x(d, 0.0f), update(d);
  std::vector<std::vector<float>> grads(workers, std::vector<float>(d));
  std::vector<compression::SparseGradient> decoded(workers);
  std::vector<double> steps(workers);
  // Shifts (RunLimits::shifts): each worker's h_i, known to both sides.
  const bool shifted = limits.shifts && method.compressor == "stochastic";
  std::vector<std::vector<float>> shifts(shifted ? workers : 0, std::vector<float>(d, 0.0f));
  // Aggregate step (RunLimits::aggregate_step): the estimate of ||sum p_i v_i||^2 handed to the
  // workers (negative until the first round has produced one).
  const bool stochastic = method.compressor == "stochastic";
  const bool aggregate = limits.aggregate_step && stochastic && workers > 1 && !shifted;
  const bool pooled = limits.pooled_step && stochastic && workers > 1 && !shifted;
  double pooled_gamma = -1.0;  // the last round's common step (none before the first)
  // RunLimits::secant_noise: the last round's move x_t - x_{t-1} and the gradients' inner
  // product with it at x_{t-1}, and running means of the secant curvature along the move and of
  // its price at M's diagonal.
  const bool secant = pooled && limits.secant_noise && limits.diagonal_noise;
  std::vector<float> last_move(secant ? d : 0);
  double last_along = 0.0;  // sum_i p_i <g_i(x_{t-1}), x_t - x_{t-1}>
  double mean_secant = 0.0, mean_diagonal = 0.0, noise_scale = 1.0;
  bool have_move = false, have_secant = false;
  // RunLimits::step_value: the last round's unscaled sum u and sum p_i^2 S_i, and running means
  // of the slope at the new point along u, sum p_i <g_i(x_t), u_{t-1}>, and of that sum.
  const bool step_value = pooled && limits.step_value;
  std::vector<float> last_sum(step_value ? d : 0);
  double last_sw = 0.0, mean_slope = 0.0, mean_sw = 0.0;
  bool have_sum = false, have_slope = false;
  std::vector<double> squares(workers);  // ||v_i||^2 of this round's vectors
  // cat's choice under the aggregate step's criterion (with it, or with RunLimits::
  // aggregate_selection under each worker's own step).
  const bool aggregate_choice =
      (aggregate || limits.aggregate_selection) && stochastic && workers > 1 && !shifted;
  std::vector<float> unscaled(aggregate_choice && !aggregate ? d : 0);
  // Noise priced by coordinate (RunLimits::diagonal_noise) or, for the aggregate step, at L.
  const bool priced = stochastic && (aggregate_choice || limits.diagonal_noise || pooled);
  std::vector<double> learning(workers);  // with shifts: omega_i, the rate h_i learns at
  double share_sq = 0.0;
  for (double p : shards.shares) share_sq += p * p;
  double g_estimate = -1.0;
  double mean_estimate = 0.0;
  bool have_estimate = false;
  std::vector<tuning::NoisePrice> prices(
      priced ? workers : 0,
      tuning::NoisePrice(limits.diagonal_noise ? problem.curvature
                                               : std::vector<double>(d, problem.L)));
  std::vector<tuning::NoisePrice::Noise> noises(workers);
  std::vector<float> mean_v(aggregate && limits.aggregate_oracle ? d : 0);
  // Virtual-iterate credit (RunLimits::virtual_credit).
  const bool virtual_credit = limits.virtual_credit && method.error_feedback && !method.ef21 &&
                              (method.compressor == "topk" || method.compressor == "sq");
  std::vector<Eigen::MatrixXd> augmented;  // each worker's rows with a 1 appended
  if (virtual_credit) {
    for (size_t i = 0; i < workers; ++i) {
      if (shards.data[i].is_sparse) throw std::runtime_error("--credit virtual needs dense data");
      augmented.push_back(denseWithBias(shards.data[i].dense));
    }
  }
  Eigen::MatrixXd whole;  // every row with a 1 appended (RunLimits::virtual_oracle)
  if (virtual_credit && limits.virtual_oracle) whole = denseWithBias(problem.data.dense);
  const bool block = limits.block_step && (method.compressor == "topk" ||
                                           method.compressor == "sq" || method.tuner == "full");
  // One block step for the sum (RunLimits::sum_block_step): on several workers, or on one with
  // EF21's state (the step along the state, which the compressed push alone does not give).
  const bool sum_step = block && limits.sum_block_step && (workers > 1 || ef21);
  // Each worker prices with its own rows' M_i (its only view of the data's curvature).
  std::vector<Columns> columns;
  if (block)
    for (size_t i = 0; i < workers; ++i) columns.push_back(augmentedColumns(shards.data[i]));
  // RunLimits::ef21_block_oracle: every row, the global gradient and the rest of the sum.
  const bool block_oracle = block && limits.ef21_block_oracle && method.ef21 && workers > 1;
  const bool gradient_scale = ef21 && sum_step && (workers == 1 || block_oracle);
  const Columns oracle_rows = block_oracle ? augmentedColumns(problem.data) : Columns();
  std::vector<float> oracle_grad(block_oracle ? d : 0), oracle_rest(block_oracle ? d : 0);
  // RunLimits::ef21_block_rule: the sum of the states at the round's start, and f's gradient as
  // worker i takes it (for kPartGlobal the round's global gradient, formed once a round).
  using BlockRule = RunLimits::BlockRule;
  const bool block_state = block && ef21 && sum_step && workers > 1 && !block_oracle &&
                           limits.ef21_block_rule != BlockRule::kDifference;
  std::vector<float> start_sum(block_state ? d : 0), taken_grad(block_state ? d : 0);
  // RunLimits::hessian_noise: each worker's rows with a 1 appended, for its Hessian's diagonal.
  // With hessian_global, every row's (one matrix, the same price for every worker).
  std::vector<Columns> own_rows;
  if (priced && limits.hessian_noise && limits.hessian_global)
    own_rows.push_back(augmentedColumns(problem.data));
  else if (priced && limits.hessian_noise)
    for (size_t i = 0; i < workers; ++i) own_rows.push_back(augmentedColumns(shards.data[i]));
  std::vector<double> hessian_diagonal(own_rows.empty() ? 0 : d);
  // RunLimits::horizon: the Hessian at x*, H* = V diag(l) V^T (dense data only), the
  // gap's coordinates V^T (x - x*) at the last round's start, and running means of F's decrease,
  // of the round's cost, and of the slope of F at the new point along the last round's sum.
  const bool horizon =
      pooled && limits.horizon != RunLimits::Horizon::kNone && method.tuner == "cat";
  Eigen::MatrixXd basis, basis_sq;
  Eigen::VectorXd curv, xs, coef_prev;
  bool have_coef = false, have_f = false, have_h = false;
  double mean_f_decrease = 0.0, mean_f_cost = 0.0, mean_hf = 0.0, mean_hsw = 0.0, horizon_k = 0.0;
  std::optional<tuning::NoisePrice> horizon_price;
  // RunLimits::HorizonModel::kAtXLocal and kLocal: each worker's own rows' Hessian at x every
  // kRespectrumRounds rounds, its spectrum V_i diag(c_i) V_i^T, and the noise priced at its own
  // W_i. With kLocal, F's decrease and slope are the workers' too (below); x_prev is the last
  // round's model.
  const bool own_spectra = horizon && (limits.horizon_model == RunLimits::HorizonModel::kAtXLocal ||
                                       limits.horizon_model == RunLimits::HorizonModel::kLocal);
  const bool all_local = limits.horizon_model == RunLimits::HorizonModel::kLocal;
  std::vector<Eigen::MatrixXd> local_rows, local_basis, local_basis_sq;
  std::vector<Eigen::VectorXd> local_curv;
  std::vector<tuning::NoisePrice> local_prices;
  Eigen::VectorXd x_prev;
  // RunLimits::HorizonModel::kAtX and kDiagonal: the whole objective's Hessian at x every
  // kRespectrumRounds rounds, the gap taken as its Newton step H(x)^-1 g(x) (the global gradient),
  // x* unused.
  const bool at_x = horizon && limits.horizon_model != RunLimits::HorizonModel::kOptimum;
  constexpr size_t kRespectrumRounds = 20;
  Eigen::MatrixXd every_row;  // rows with a 1 appended
  Eigen::VectorXd g_prev;     // with at_x: the last round's global gradient
  auto hessianAt = [&](const Eigen::MatrixXd& rows, const Eigen::VectorXd& point) {
    const Eigen::VectorXd z = rows * point;
    Eigen::VectorXd slope(z.size());
    for (Eigen::Index r = 0; r < z.size(); ++r) slope[r] = sigmoidSlope(z[r]);
    Eigen::MatrixXd H = rows.transpose() * slope.asDiagonal() * rows / double(rows.rows());
    for (Eigen::Index j = 0; j + 1 < Eigen::Index(d); ++j) H(j, j) += problem.l2;
    return H;
  };
  auto spectrumAt = [&](const Eigen::VectorXd& point) {
    if (own_spectra) {
      for (size_t i = 0; i < workers; ++i) {
        const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> own(hessianAt(local_rows[i], point));
        local_curv[i] = own.eigenvalues().cwiseMax(0.0);
        local_basis[i] = own.eigenvectors();
        local_basis_sq[i] = local_basis[i].array().square().matrix();
      }
      if (all_local) return;
    }
    const Eigen::MatrixXd H = hessianAt(every_row, point);
    if (limits.horizon_model == RunLimits::HorizonModel::kDiagonal) {
      // Every coordinate taken as a direction of its own, at the Hessian's diagonal.
      curv = H.diagonal().cwiseMax(0.0);
      basis = Eigen::MatrixXd::Identity(Eigen::Index(d), Eigen::Index(d));
      basis_sq = basis;
      return;
    }
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(H);
    curv = eigen.eigenvalues().cwiseMax(0.0);
    basis = eigen.eigenvectors();
    basis_sq = basis.array().square().matrix();
  };
  if (own_spectra) {
    for (size_t i = 0; i < workers; ++i) local_rows.push_back(denseWithBias(shards.data[i].dense));
    local_basis.resize(workers);
    local_basis_sq.resize(workers);
    local_curv.resize(workers);
  }
  if (horizon) {
    if (problem.data.is_sparse || problem.xstar.size() != d)
      throw std::runtime_error("the horizon oracle needs dense data and x*");
    if (!all_local) every_row = denseWithBias(problem.data.dense);
    xs = Eigen::Map<const Eigen::VectorXf>(problem.xstar.data(), Eigen::Index(d)).cast<double>();
    if (!at_x) spectrumAt(xs);
  }
  Trace trace;
  double bits = 0, packets = 0, packet_cost = 0, selection = 0, levels = 0;
  size_t pushes = 0;
  // sum_i p_i <g_i, u> over this round's gradients (each worker's part a scalar).
  auto sharedInner = [&](const std::vector<float>& u) {
    double sum = 0.0;
    for (size_t i = 0; i < workers; ++i) {
      double gu = 0.0;
      for (size_t j = 0; j < d; ++j) gu += static_cast<double>(grads[i][j]) * u[j];
      sum += shards.shares[i] * gu;
    }
    return sum;
  };
  // The running means below weigh the newest round by kEstimateWeight (the first is taken whole).
  auto blend = [](double mean, double fresh, bool have) {
    return have ? (1.0 - kEstimateWeight) * mean + kEstimateWeight * fresh : fresh;
  };
  // EF21: worker i's energy sent and left this round into their running means.
  auto recordFlow = [&](size_t i, double sent_sq, double left_sq) {
    mean_sent[i] = blend(mean_sent[i], sent_sq, have_flow[i]);
    mean_left[i] = blend(mean_left[i], left_sq, have_flow[i]);
    have_flow[i] = true;
  };
  // sum_i p_i <v_i, u> for the unscaled sum u = sum p_i Q_i(v_i): each worker's inner product
  // with the sum it receives, unbiased for G and linear in the compression noise (||u||^2 - V is
  // unbiased too, but quadratic in it, and at small T its noise swamps G), averaged over about
  // ten rounds.
  auto estimateG = [&](const std::vector<float>& u) {
    mean_estimate = blend(mean_estimate, sharedInner(u), have_estimate);
    have_estimate = true;
    g_estimate = std::max(mean_estimate, 0.0);
  };
  // RunLimits::batch: each worker's row indices (the first `batch` of them drawn each round) and
  // the generator that draws them. Empty: full gradients.
  std::vector<std::vector<size_t>> batch_rows;
  std::vector<Rng> batch_rngs;
  if (limits.batch > 0) {
    for (size_t i = 0; i < workers; ++i) {
      const size_t n = shards.data[i].rows();
      if (limits.batch > n)
        throw std::runtime_error("--batch " + std::to_string(limits.batch) +
                                 " exceeds a worker's " + std::to_string(n) + " rows");
      batch_rows.emplace_back(n);
      for (size_t r = 0; r < n; ++r) batch_rows.back()[r] = r;
      batch_rngs.emplace_back(deriveSeed(seed, 2000 + i));
    }
  }
  // RunLimits::round_ratio: the last round's sum of predicted improvements over predicted costs.
  double round_lambda = -1.0;
  // RunLimits::measured_ratio: running means of the round's measured decrease and its cost.
  double last_f = 0.0, last_cost = 0.0, mean_decrease = 0.0, mean_cost = 0.0, last_u_sq = 0.0;
  double gsq_prev = 0.0;
  bool have_ratio = false;
  for (size_t round = 0;; ++round) {
    double round_improvement = 0.0, round_cost = 0.0;
    // f(x) is the share-weighted sum of the local objectives (each carries the same L2 term).
    double f = 0.0;
    for (size_t i = 0; i < workers; ++i) {
      if (batch_rows.empty()) {
        f += shards.shares[i] * problem.model->lossAndGradient(x, shards.data[i], {}, grads[i]);
        continue;
      }
      f += shards.shares[i] * problem.model->loss(x, shards.data[i]);
      // A partial Fisher-Yates shuffle: the first `batch` rows of a fresh permutation.
      std::vector<size_t>& rows = batch_rows[i];
      for (size_t k = 0; k < limits.batch; ++k) {
        std::uniform_int_distribution<size_t> pick(k, rows.size() - 1);
        std::swap(rows[k], rows[pick(batch_rngs[i])]);
      }
      problem.model->lossAndGradient(x, shards.data[i], {rows.data(), limits.batch}, grads[i]);
    }
    // Totals so far are what it took to reach x_round.
    trace.f.push_back(f);
    trace.bits.push_back(bits);
    trace.packets.push_back(packets);
    trace.packet_cost.push_back(packet_cost);
    trace.selection_seconds.push_back(selection);
    if (!std::isfinite(f) || f > 10.0 * problem.f0 + 1.0) {
      trace.diverged = true;
      break;
    }
    if (round >= limits.max_rounds || f - problem.fstar <= limits.stop_gap) break;
    // With EF21's state and the sum's block step on one worker, or with the oracle: ||grad f||^2
    // at this round's start (one worker's gradient is f's).
    double gsq_now = 0.0;
    if (gradient_scale) {
      std::vector<double> gsum(d, 0.0);
      for (size_t k = 0; k < workers; ++k)
        for (size_t j = 0; j < d; ++j) gsum[j] += shards.shares[k] * grads[k][j];
      for (double a : gsum) gsq_now += a * a;
    }
    if (measured && round > 0 && last_cost > 0.0) {
      // With EF21's state and the sum's block step the decrease is measured per unit of the
      // squared gradient at the round's start and priced at this round's: the descent lemma's
      // decrease is quadratic in the gradient, so the running mean no longer lags a return that
      // falls with the gap. One worker knows f's gradient (its own); on several, where no one
      // does, the stand-in is the direction the last round stepped along, u = sum p_i h_i, which
      // the states make track it (the oracle, RunLimits::ef21_block_oracle, takes the gradient).
      const bool per_gradient = gradient_scale && gsq_prev > 0.0;
      const bool per_direction = !gradient_scale && ef21 && sum_step && last_u_sq > 0.0;
      const double scale = per_gradient ? gsq_prev : per_direction ? last_u_sq : 1.0;
      const double now = per_gradient ? gsq_now : scale;
      mean_decrease = blend(mean_decrease, (last_f - f) / scale, have_ratio);
      mean_cost = blend(mean_cost, last_cost, have_ratio);
      have_ratio = true;
      round_lambda = mean_decrease > 0.0 ? mean_decrease / mean_cost * now : -1.0;
    }
    gsq_prev = gsq_now;
    last_f = f;
    if (horizon) {
      // W's weights at the horizon left; F's decrease over the last round under the same W.
      const Eigen::VectorXd point =
          Eigen::Map<const Eigen::VectorXf>(x.data(), Eigen::Index(d)).cast<double>();
      const bool respectrum = at_x && round % kRespectrumRounds == 0;
      if (respectrum) spectrumAt(point);
      const double g = pooled_gamma > 0.0 ? pooled_gamma : 1.0 / problem.L;
      // The rounds still to come (RunLimits::Horizon).
      const double gap = f - problem.fstar;
      const double constant = have_ratio && mean_decrease > 0.0 ? gap / mean_decrease : 0.0;
      double m = 0.0;
      switch (limits.horizon) {
        case RunLimits::Horizon::kRounds:
          m = round < limits.horizon_rounds ? double(limits.horizon_rounds - round) : 0.0;
          break;
        case RunLimits::Horizon::kRate:
          m = std::min(constant, 1e5);
          break;
        case RunLimits::Horizon::kTarget:
          m = std::min(constant * std::log(std::max(gap / limits.stop_gap, 1.0)), 1e5);
          break;
        case RunLimits::Horizon::kElapsed:
          m = static_cast<double>(round);
          break;
        case RunLimits::Horizon::kNone:
          break;
      }
      // F's measured decrease over a round of the given cost, and F's slope along the last sum
      // against that round's sum of squares, into their running means.
      auto recordDecrease = [&](double decrease, double cost) {
        mean_f_decrease = blend(mean_f_decrease, decrease, have_f);
        mean_f_cost = blend(mean_f_cost, cost, have_f);
        have_f = true;
        round_lambda = mean_f_decrease > 0.0 ? mean_f_decrease / mean_f_cost : -1.0;
      };
      auto recordSlope = [&](double hf, double sw) {
        mean_hf = blend(mean_hf, hf, have_h);
        mean_hsw = blend(mean_hsw, sw, have_h);
        have_h = true;
        horizon_k = std::max(0.0, 2.0 * mean_hf / mean_hsw);
      };
      // With own spectra: each worker's (I - gamma H_i)^(2m) in its own basis.
      std::vector<Eigen::VectorXd> local_filter(own_spectra ? workers : 0);
      for (size_t i = 0; i < local_filter.size(); ++i) {
        const Eigen::VectorXd& c = local_curv[i];
        local_filter[i].resize(c.size());
        for (Eigen::Index k = 0; k < c.size(); ++k)
          local_filter[i][k] = std::pow(std::fabs(1.0 - g * c[k]), 2.0 * m);
      }
      if (all_local) {
        // Each worker's part of F's decrease over the last round, with its own W_i and its own
        // gradient for W e = (I - gamma H)^(2m) g: for the move delta = x_{t-1} - x_t,
        // F(x_{t-1}) - F(x_t) = delta^T W e_t + delta^T W delta / 2; and of F's slope along the
        // last round's sum, u^T W e_t (two scalars in each push, not counted).
        double f_decrease = 0.0, hf = 0.0;
        const bool moved = x_prev.size() == point.size() && last_cost > 0.0;
        const bool sloped = step_value && have_sum && last_sw > 0.0;
        const Eigen::VectorXd along =
            sloped ? Eigen::Map<const Eigen::VectorXf>(last_sum.data(), Eigen::Index(d))
                         .cast<double>()
                         .eval()
                   : Eigen::VectorXd();
        for (size_t i = 0; i < workers; ++i) {
          const Eigen::VectorXd& c = local_curv[i];
          const Eigen::VectorXd& filter = local_filter[i];
          const Eigen::VectorXd gi =
              Eigen::Map<const Eigen::VectorXf>(grads[i].data(), Eigen::Index(d)).cast<double>();
          const Eigen::VectorXd we = filter.cwiseProduct(local_basis[i].transpose() * gi);
          if (moved) {
            const Eigen::VectorXd dv = local_basis[i].transpose() * (x_prev - point);
            f_decrease +=
                shards.shares[i] *
                (dv.dot(we) + 0.5 * (c.cwiseProduct(filter).array() * dv.array().square()).sum());
          }
          if (sloped) hf += shards.shares[i] * (local_basis[i].transpose() * along).dot(we);
        }
        if (moved) recordDecrease(f_decrease, last_cost);
        if (sloped) recordSlope(hf, last_sw);
        x_prev = point;
      } else {
        Eigen::VectorXd coef;
        if (at_x) {
          Eigen::VectorXd g_now = Eigen::VectorXd::Zero(Eigen::Index(d));
          for (size_t i = 0; i < workers; ++i)
            g_now +=
                shards.shares[i] *
                Eigen::Map<const Eigen::VectorXf>(grads[i].data(), Eigen::Index(d)).cast<double>();
          const Eigen::VectorXd inverse = curv.cwiseMax(1e-12).cwiseInverse();
          coef = (basis.transpose() * g_now).cwiseProduct(inverse);
          // The last round's gap in this basis (unchanged unless the spectrum was recomputed).
          if (have_coef && respectrum)
            coef_prev = (basis.transpose() * g_prev).cwiseProduct(inverse);
          g_prev = g_now;
        } else {
          coef = basis.transpose() * (point - xs);
        }
        Eigen::VectorXd decay(curv.size());
        for (Eigen::Index k = 0; k < curv.size(); ++k)
          decay[k] = curv[k] * std::pow(std::fabs(1.0 - g * curv[k]), 2.0 * m);
        if (have_coef && last_cost > 0.0) {
          const double before = 0.5 * (decay.array() * coef_prev.array().square()).sum();
          const double after = 0.5 * (decay.array() * coef.array().square()).sum();
          recordDecrease(before - after, last_cost);
        }
        coef_prev = coef;
        have_coef = true;
        if (step_value && have_sum && last_sw > 0.0) {
          const Eigen::VectorXd along =
              basis.transpose() *
              Eigen::Map<const Eigen::VectorXf>(last_sum.data(), Eigen::Index(d)).cast<double>();
          recordSlope((decay.array() * along.array() * coef.array()).sum(), last_sw);
        }
        const Eigen::VectorXd w = basis_sq * decay;
        horizon_price.emplace(std::vector<double>(w.data(), w.data() + w.size()));
      }
      if (own_spectra) {
        local_prices.clear();
        for (size_t i = 0; i < workers; ++i) {
          const Eigen::VectorXd own_w =
              local_basis_sq[i] * local_curv[i].cwiseProduct(local_filter[i]);
          local_prices.emplace_back(std::vector<double>(own_w.data(), own_w.data() + own_w.size()));
        }
      }
    }
    if (step_value && have_sum && last_sw > 0.0) {
      // Under the pooled step gamma = sw / (L sw + V), less noise lengthens the step:
      // d gamma / dV = -gamma^2 / sw, worth the slope h = <g(x_t), u_{t-1}> at the step's end
      // per unit of step. A unit less of V is worth gamma^2 / 2 at that step plus
      // gamma^2 h / sw: the noise price's scale is 1 + 2 h / sw (each worker's part of h a
      // scalar in its push; not counted). Where the step already overshoots (h < 0) less noise
      // is worth less; at or below 0 it is worth nothing.
      const double slope = sharedInner(last_sum);
      mean_slope = blend(mean_slope, slope, have_slope);
      mean_sw = blend(mean_sw, last_sw, have_slope);
      have_slope = true;
      noise_scale = std::max(0.0, 1.0 + 2.0 * mean_slope / mean_sw);
    }
    if (secant) {
      // sum_i p_i <g_i(x_t) - g_i(x_{t-1}), x_t - x_{t-1}> is the move's curvature under the
      // Hessian averaged along it (each worker's part rides in its push, a scalar); the same
      // move priced at M's diagonal, sum_j M_jj dx_j^2, is what the noise price assumes.
      if (have_move) {
        const double along = sharedInner(last_move) - last_along;
        double diag = 0.0;
        for (size_t j = 0; j < d; ++j)
          diag += problem.curvature[j] * static_cast<double>(last_move[j]) * last_move[j];
        if (diag > 0.0) {
          mean_secant = blend(mean_secant, along, have_secant);
          mean_diagonal = blend(mean_diagonal, diag, have_secant);
          have_secant = true;
          if (mean_secant > 0.0) noise_scale = mean_secant / mean_diagonal;
        }
      }
    }

    // RunLimits::common_level: one level for every worker, chosen from all of this round's noise
    // curves (a diagnostic: no worker has the others').
    uint32_t common = 0;
    if (pooled && limits.common_level && method.tuner == "cat" && !method.error_feedback &&
        pooled_gamma > 0.0 && round_lambda > 0.0) {
      for (size_t i = 0; i < workers; ++i) prices[i].prepare(grads[i]);
      double best_score = -std::numeric_limits<double>::infinity();
      const double c_scale = static_cast<double>(workers);
      for (uint32_t T = 1; T <= d; ++T) {
        double noise = 0.0;
        for (size_t i = 0; i < workers; ++i)
          noise += 0.5 * pooled_gamma * pooled_gamma * shards.shares[i] * shards.shares[i] *
                   noise_scale * prices[i].at(T).priced;
        const double score = -noise - round_lambda * c_scale *
                                          tuner_cost.cost(memories[0].inner().encodedBytes(d, T));
        if (score > best_score) {
          best_score = score;
          common = T;
        }
      }
    }

    // The diagonal of worker i's Hessian at x, sum_r sigma'(z_r) a_rj^2 / n_i + lambda (the bias
    // unpenalised): one more pass over its rows, as a gradient is.
    const Eigen::VectorXd x_now =
        own_rows.empty()
            ? Eigen::VectorXd()
            : Eigen::Map<const Eigen::VectorXf>(x.data(), Eigen::Index(d)).cast<double>();
    for (size_t i = 0; i < own_rows.size(); ++i) {
      const Columns& A = own_rows[i];
      const Eigen::VectorXd z = A * x_now;
      const double n = static_cast<double>(A.rows());
      for (Eigen::Index j = 0; j < A.outerSize(); ++j) {
        double h = 0.0;
        for (Columns::InnerIterator it(A, j); it; ++it)
          h += sigmoidSlope(z[it.row()]) * it.value() * it.value();
        hessian_diagonal[size_t(j)] = h / n + (size_t(j) + 1 < d ? problem.l2 : 0.0);
      }
      if (limits.hessian_global) {
        for (auto& price : prices) price = tuning::NoisePrice(hessian_diagonal);
      } else {
        prices[i] = tuning::NoisePrice(hessian_diagonal);
      }
    }

    if (block_state) {
      const bool global = limits.ef21_block_rule == BlockRule::kPartGlobal;
      std::fill(start_sum.begin(), start_sum.end(), 0.0f);
      if (global) std::fill(taken_grad.begin(), taken_grad.end(), 0.0f);
      for (size_t k = 0; k < workers; ++k) {
        const auto p = static_cast<float>(shards.shares[k]);
        for (size_t j = 0; j < d; ++j) {
          start_sum[j] += p * states[k][j];
          if (global) taken_grad[j] += p * grads[k][j];
        }
      }
    }
    double step = std::numeric_limits<double>::infinity();
    if (aggregate && limits.aggregate_oracle) {
      std::fill(mean_v.begin(), mean_v.end(), 0.0f);
      for (size_t i = 0; i < workers; ++i)
        for (size_t j = 0; j < d; ++j)
          mean_v[j] += static_cast<float>(shards.shares[i]) * grads[i][j];
      g_estimate = 0.0;
      for (float g : mean_v) g_estimate += static_cast<double>(g) * g;
    }
    for (size_t i = 0; i < workers; ++i) {
      // ||g_i||^2 of the gradient itself, before any shift.
      double g_sq = 0.0;
      if (limits.gradient_credit || shifted) {
        for (float g : grads[i]) g_sq += static_cast<double>(g) * g;
      }
      double base = 0.0;
      if (shifted) {
        double v_sq = 0.0;
        for (size_t j = 0; j < d; ++j) {
          grads[i][j] -= shifts[i][j];
          v_sq += static_cast<double>(grads[i][j]) * grads[i][j];
        }
        // Negative when the shift is worse than none; the criterion then falls back to the
        // paper's (a base must be >= 0 for the search's bounds).
        if (limits.shift_credit) base = std::max(0.0, (g_sq - v_sq) / (2.0 * problem.L));
      }
      std::span<const float> v;
      if (ef21) {
        double gs = 0.0, ds = 0.0;
        if (!momenta.empty()) {
          // RunLimits::ef21_momentum: the running mean stands for the gradient.
          const auto eta = static_cast<float>(round == 0 ? 1.0 : limits.ef21_momentum);
          for (size_t j = 0; j < d; ++j)
            momenta[i][j] = (1.0f - eta) * momenta[i][j] + eta * grads[i][j];
        }
        const std::vector<float>& tracked = momenta.empty() ? grads[i] : momenta[i];
        for (size_t j = 0; j < d; ++j) {
          differences[i][j] = tracked[j] - states[i][j];
          gs += static_cast<double>(grads[i][j]) * grads[i][j];
          ds += static_cast<double>(differences[i][j]) * differences[i][j];
        }
        v = differences[i];
        if (limits.shift_credit) base = std::max(0.0, (gs - ds) / (2.0 * problem.L));
      } else {
        v = memories[i].corrected(grads[i]);
      }
      const auto t0 = std::chrono::steady_clock::now();
      const double grad_sq = limits.gradient_credit ? g_sq : -1.0;
      tuning::TuningDecision decision;
      double v_sq = 0.0;
      if (priced) {
        for (float a : v) v_sq += static_cast<double>(a) * a;
        prices[i].prepare(v);
      }
      if (virtual_credit && method.tuner == "cat" && limits.virtual_oracle && workers > 1) {
        // What no worker knows: the global gradient, and the other workers' residuals as they
        // stand when worker i chooses (this round's for those that pushed before it).
        std::vector<float> global(d, 0.0f), others(d, 0.0f);
        for (size_t k = 0; k < workers; ++k) {
          const auto p = static_cast<float>(shards.shares[k]);
          const auto& r = memories[k].residual();
          for (size_t j = 0; j < d; ++j) {
            global[j] += p * grads[k][j];
            if (k != i && r.size() == d) others[j] += p * r[j];
          }
        }
        decision = chooseVirtual(v, global, whole, x, problem.l2, problem.L,
                                 method.compressor == "sq", memories[i].inner(), tuner_cost, others,
                                 shards.shares[i], limits.round_ratio ? round_lambda : -1.0);
        round_improvement += decision.predicted_improvement;
        round_cost += decision.predicted_cost;
      } else if (virtual_credit && method.tuner == "cat") {
        decision = chooseVirtual(v, grads[i], augmented[i], x, problem.l2, problem.L,
                                 method.compressor == "sq", memories[i].inner(), tuner_cost, {},
                                 1.0, limits.round_ratio ? round_lambda : -1.0);
        round_improvement += decision.predicted_improvement;
        round_cost += decision.predicted_cost;
      } else if (common > 0) {
        const double c = tuner_cost.cost(memories[i].inner().encodedBytes(d, common));
        decision = {common, c, 0.0, pooled_gamma, true};
        round_cost += c;
      } else if (horizon && have_f && pooled_gamma > 0.0 && round_lambda > 0.0) {
        tuning::NoisePrice& own_price = local_prices.empty() ? *horizon_price : local_prices[i];
        own_price.prepare(v);
        decision =
            chooseHorizon(own_price, prices[i], horizon_k, pooled_gamma, shards.shares[i],
                          round_lambda, static_cast<uint32_t>(d), memories[i].inner(), tuner_cost);
        round_improvement += decision.predicted_improvement;
        round_cost += decision.predicted_cost;
      } else if (pooled && method.tuner == "cat" && pooled_gamma > 0.0 && round_lambda > 0.0) {
        decision =
            choosePooled(prices[i], pooled_gamma, shards.shares[i], round_lambda,
                         static_cast<uint32_t>(d), memories[i].inner(), tuner_cost, noise_scale);
        round_improvement += decision.predicted_improvement;
        round_cost += decision.predicted_cost;
      } else if (priced && method.tuner == "cat") {
        // Under the aggregate step, while no positive estimate of G exists (the first round,
        // or a running mean at or below zero), each worker chooses alone.
        decision =
            choosePriced(prices[i], v_sq, base, shards.shares[i], share_sq,
                         aggregate_choice && g_estimate > 0.0 ? g_estimate : -1.0, limits.own_share,
                         problem.L, static_cast<uint32_t>(d), memories[i].inner(), tuner_cost,
                         limits.round_ratio ? round_lambda : -1.0);
        round_improvement += decision.predicted_improvement;
        round_cost += decision.predicted_cost;
      } else if (ef21 && measured && sum_step && method.tuner == "cat" && round_lambda > 0.0) {
        // Under the sum's block step each worker values a level by the round's decrease it
        // predicts, weighted by 1 + the rounds what is left stays (as below). On one worker the
        // round steps along its state, so that decrease is exact: D(h + Q). On several a worker
        // knows the sum u of the states, its rows and its difference, not the others': it takes
        // their differences as its own (f's gradient u + v_i, the sum moving to u + Q(v_i)) and
        // its share p_i of that round's decrease as its own (RunLimits::ef21_block_rule). Priced
        // by its part alone, p_i Q moves the sum too little for any coordinate to pay.
        const double stay = have_flow[i] && mean_sent[i] > 0.0 ? mean_left[i] / mean_sent[i] : 0.0;
        if (block_state) {
          // kPartGlobal's gradient is the round's, already in taken_grad.
          if (limits.ef21_block_rule == BlockRule::kPartOwn)
            std::copy(grads[i].begin(), grads[i].end(), taken_grad.begin());
          else if (limits.ef21_block_rule != BlockRule::kPartGlobal)
            for (size_t j = 0; j < d; ++j) taken_grad[j] = start_sum[j] + v[j];
          const bool alike = limits.ef21_block_rule == BlockRule::kAlike;
          const double p = shards.shares[i];
          decision =
              chooseBlockState(v, taken_grad, start_sum, columns[i], problem.l2,
                               method.compressor == "sq", (alike ? p : 1.0) * (1.0 + stay),
                               round_lambda, memories[i].inner(), tuner_cost, alike ? 1.0 : p);
        } else if (block_oracle) {
          // What no worker knows: the global gradient, every row, and the others' states as they
          // stand (this round's for those that chose before it); the round's exact decrease.
          std::fill(oracle_grad.begin(), oracle_grad.end(), 0.0f);
          std::fill(oracle_rest.begin(), oracle_rest.end(), 0.0f);
          for (size_t k = 0; k < workers; ++k) {
            const auto p = static_cast<float>(shards.shares[k]);
            for (size_t j = 0; j < d; ++j) {
              oracle_grad[j] += p * grads[k][j];
              oracle_rest[j] += p * states[k][j];
            }
          }
          decision = chooseBlockState(v, oracle_grad, oracle_rest, oracle_rows, problem.l2,
                                      method.compressor == "sq", 1.0 + stay, round_lambda,
                                      memories[i].inner(), tuner_cost, shards.shares[i]);
        } else if (workers == 1)
          decision = chooseBlockState(v, grads[i], states[i], columns[i], problem.l2,
                                      method.compressor == "sq", 1.0 + stay, round_lambda,
                                      memories[i].inner(), tuner_cost);
        else
          decision = chooseBlock(v, v, columns[i], problem.l2, method.compressor == "sq", 0,
                                 memories[i].inner(), tuner_cost, 1.0 + stay, round_lambda);
        round_cost += decision.predicted_cost;
      } else if (ef21 && measured && method.tuner == "cat" && round_lambda > 0.0) {
        // What a push leaves in the difference stays there: by Little's law for as many rounds
        // on average as the difference's energy left over the energy sent a round (running means),
        // and every one of them pays for it as this round does.
        const double stay = have_flow[i] && mean_sent[i] > 0.0 ? mean_left[i] / mean_sent[i] : 0.0;
        const double w = shards.shares[i] * (1.0 + stay);
        decision = chooseLagrangian(v, method.compressor == "sq", problem.L, w, round_lambda,
                                    memories[i].inner(), tuner_cost, limits.ef21_skip);
        round_cost += decision.predicted_cost;
      } else if (block) {
        // cat scans every level; the others pick theirs as usual and get its block step.
        const uint32_t level =
            method.tuner == "cat" && !limits.paper_selection
                ? 0
                : tuners[i]->choose(v, 0, memories[i].inner(), tuner_cost, grad_sq, base).level;
        decision = chooseBlock(v, grads[i], columns[i], problem.l2, method.compressor == "sq",
                               level, memories[i].inner(), tuner_cost);
        if (ef21 && measured) round_cost += decision.predicted_cost;
      } else {
        decision = tuners[i]->choose(v, 0, memories[i].inner(), tuner_cost, grad_sq, base);
        if (ef21 && measured) round_cost += decision.predicted_cost;
      }
      if (priced) {
        noises[i] = prices[i].at(decision.level);
        // A zero vector is sent exactly: the full step, as omega = 1 gives.
        decision.step = v_sq > 0.0 ? v_sq / (problem.L * v_sq + noises[i].priced) : 1.0 / problem.L;
        learning[i] = v_sq > 0.0 ? v_sq / (v_sq + noises[i].raw) : 1.0;
        squares[i] = v_sq;
      }
      selection += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (ef21 && decision.level == 0) {
        // No push (RunLimits::ef21_skip): nothing on the wire, the state stands for the worker
        // and all of v is left.
        double left_sq = 0.0;
        for (float a : v) left_sq += static_cast<double>(a) * a;
        recordFlow(i, 0.0, left_sq);
        step = std::min(step, decision.step);
        steps[i] = decision.step;
        decoded[i] = {static_cast<uint32_t>(d), {}, states[i]};
        continue;
      }
      compression::Compressed c = ef21 ? memories[i].compress(v, decision.level, rngs[i])
                                       : memories[i].compressCorrected(decision.level, rngs[i]);
      const size_t bytes = c.bytes.size();
      bits += 8.0 * static_cast<double>(bytes);
      packets += static_cast<double>(packet.packets(bytes));
      packet_cost += packet.cost(bytes);
      levels += decision.level;
      ++pushes;
      // Steps differ only for stochastic sparsification (omega_i / L); top-T and S+Q report 1/L.
      // Each worker's own step is the one its improvement assumed; the smallest keeps the
      // aggregate an unbiased direction.
      step = std::min(step, decision.step);
      steps[i] = decision.step;
      if (ef21) {
        // The energy sent, ||Q||^2, and the energy left, ||v - Q||^2, into their running means.
        std::fill(sent.begin(), sent.end(), 0.0f);
        compression::addScaled(c.decoded, 1.0f, sent);
        double sent_sq = 0.0, left_sq = 0.0;
        for (size_t j = 0; j < d; ++j) {
          sent_sq += static_cast<double>(sent[j]) * sent[j];
          const double r = static_cast<double>(v[j]) - sent[j];
          left_sq += r * r;
        }
        recordFlow(i, sent_sq, left_sq);
        compression::addScaled(c.decoded, 1.0f, states[i]);
        decoded[i] = {static_cast<uint32_t>(d), {}, states[i]};
      } else {
        decoded[i] = std::move(c.decoded);
      }
    }
    last_cost = round_cost;
    if (!measured && round_cost > 0.0 && round_improvement > 0.0)
      round_lambda = round_improvement / round_cost;
    std::fill(update.begin(), update.end(), 0.0f);
    if (pooled) {
      double sw = 0.0, noise = 0.0;
      for (size_t i = 0; i < workers; ++i) {
        const double p2 = shards.shares[i] * shards.shares[i];
        sw += p2 * squares[i];
        noise += p2 * noises[i].priced;
        compression::addScaled(decoded[i], static_cast<float>(shards.shares[i]), update);
      }
      const double gamma = sw > 0.0 ? sw / (problem.L * sw + noise) : step;
      pooled_gamma = gamma;
      if (step_value) {
        last_sum = update;
        last_sw = sw;
        have_sum = true;
      }
      for (size_t j = 0; j < d; ++j) {
        const float before = x[j];
        x[j] -= static_cast<float>(gamma) * update[j];
        if (secant) last_move[j] = x[j] - before;
      }
      have_move = secant;
      if (secant) last_along = sharedInner(last_move);
      continue;
    }
    if (aggregate) {
      double noise = 0.0;
      for (size_t i = 0; i < workers; ++i)
        noise += shards.shares[i] * shards.shares[i] * noises[i].priced;
      for (size_t i = 0; i < workers; ++i)
        compression::addScaled(decoded[i], static_cast<float>(shards.shares[i]), update);
      // Without a positive estimate of G (the first round, or a running mean at or below zero)
      // the round takes the smallest worker's step.
      const double gamma = g_estimate > 0.0 ? g_estimate / (problem.L * g_estimate + noise) : step;
      for (size_t j = 0; j < d; ++j) x[j] -= static_cast<float>(gamma) * update[j];
      if (!limits.aggregate_oracle) {
        estimateG(update);
      }
      continue;
    }
    if (sum_step) {
      for (size_t i = 0; i < workers; ++i)
        compression::addScaled(decoded[i], static_cast<float>(shards.shares[i]), update);
      const Eigen::VectorXd u =
          Eigen::Map<const Eigen::VectorXf>(update.data(), Eigen::Index(d)).cast<double>();
      const Eigen::Index bias = Eigen::Index(d) - 1;
      const double w2 = u.head(bias).squaredNorm();
      double along = 0.0, curvature = 0.0;
      for (size_t i = 0; i < workers; ++i) {
        const Eigen::VectorXd Xu = columns[i] * u;
        const double gu = Eigen::Map<const Eigen::VectorXf>(grads[i].data(), Eigen::Index(d))
                              .cast<double>()
                              .dot(u);
        along += shards.shares[i] * gu;
        curvature += shards.shares[i] *
                     (0.25 * Xu.squaredNorm() / double(columns[i].rows()) + problem.l2 * w2);
        // The two scalars go up in a message of their own.
        constexpr size_t kScalarBytes = 2 * sizeof(double);
        bits += 8.0 * kScalarBytes;
        packets += static_cast<double>(packet.packets(kScalarBytes));
        packet_cost += packet.cost(kScalarBytes);
        // What the round cost in full is the measured price's denominator.
        if (ef21 && measured) last_cost += tuner_cost.cost(kScalarBytes);
      }
      last_u_sq = u.squaredNorm();
      // <g, u> <= 0: u is no descent direction for the sum; the round moves nothing.
      const double gamma = along > 0.0 && curvature > 0.0 ? along / curvature : 0.0;
      for (size_t j = 0; j < d; ++j) x[j] -= static_cast<float>(gamma * update[j]);
      continue;
    }
    if (!unscaled.empty()) {
      // G's estimate as under the aggregate step (the update itself is scaled by each step).
      std::fill(unscaled.begin(), unscaled.end(), 0.0f);
      for (size_t i = 0; i < workers; ++i)
        compression::addScaled(decoded[i], static_cast<float>(shards.shares[i]), unscaled);
      estimateG(unscaled);
    }
    for (size_t i = 0; i < workers; ++i) {
      const double s = limits.per_worker_step ? steps[i] : step;
      compression::addScaled(decoded[i], static_cast<float>(shards.shares[i] * s), update);
      if (shifted) {
        const auto w = static_cast<float>(shards.shares[i] / problem.L);
        for (size_t j = 0; j < d; ++j) update[j] += w * shifts[i][j];
        const double rate = priced ? learning[i] : steps[i] * problem.L;
        compression::addScaled(decoded[i], static_cast<float>(rate), shifts[i]);
      }
    }
    for (size_t j = 0; j < d; ++j) x[j] -= update[j];
  }
  trace.mean_level = pushes ? levels / static_cast<double>(pushes) : 0.0;
  return trace;
}

}  // namespace tern::bench::cat
