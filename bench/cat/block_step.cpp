#include "block_step.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tern::bench::cat {
namespace {

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
    auto larger = [&](uint32_t i, uint32_t k) {
      const float x = std::fabs(v[i]), y = std::fabs(v[k]);
      return x > y || (x == y && i < k);
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

}  // namespace

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

tuning::TuningDecision chooseBlock(std::span<const float> v, std::span<const float> grad,
                                   const Columns& X, double l2, bool sign_scale,
                                   uint32_t fixed_level, const compression::Compressor& comp,
                                   const costmodel::CostModel& cost) {
  const auto d = static_cast<uint32_t>(v.size());
  const double n = double(X.rows());
  const uint32_t last = fixed_level > 0 ? std::min(fixed_level, d) : d;
  BlockScan scan(v, grad, X, sign_scale, last);
  tuning::TuningDecision best{1, 0.0, 0.0, 0.0, true};
  double best_ratio = -1.0;
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
    const double score = imp / c;
    if (score > best_ratio) {
      best_ratio = score;
      best = {T, c, imp, step, true};
    }
  }
  return best;
}

tuning::TuningDecision chooseBlockState(std::span<const float> v, std::span<const float> grad,
                                        std::span<const float> state, const Columns& X, double l2,
                                        bool sign_scale, double w, double lambda,
                                        const compression::Compressor& comp,
                                        const costmodel::CostModel& cost) {
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
    // u = h + c q, c the scale the compressor decodes q with.
    const double c = sign_scale ? scan.s1 / T : 1.0;
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

}  // namespace tern::bench::cat
