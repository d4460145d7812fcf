// One-hidden-layer perceptron: h = relu(X W1^T + b1), logits = h W2^T + b2, mean cross-entropy,
// L2 on W1 and W2 (not the biases). Not convex and not globally smooth in closed form, so
// smoothness() has no value. He initialisation for the ReLU layer keeps activations O(1).
#include <cmath>
#include <stdexcept>

#include "common/ml/detail/model_support.hpp"
#include "common/ml/detail/random.hpp"
#include "common/ml/model.hpp"

namespace tern::ml::detail {
namespace {

using ConstMatrixMap = Eigen::Map<const DenseMatrix>;
using MatrixMap = Eigen::Map<DenseMatrix>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;

// Views of the flat parameter (or gradient) vector: W1, b1, W2, b2 back to back.
template <class Matrix, class Vector, class Float>
struct Layers {
  Layers(Float* p, Eigen::Index features, Eigen::Index hidden, Eigen::Index classes)
      : w1(p, hidden, features),
        b1(p + hidden * features, hidden),
        w2(p + hidden * features + hidden, classes, hidden),
        b2(p + hidden * features + hidden + classes * hidden, classes) {}
  Matrix w1;
  Vector b1;
  Matrix w2;
  Vector b2;
};
using ConstLayers = Layers<ConstMatrixMap, ConstVectorMap, const float>;
using GradLayers = Layers<MatrixMap, VectorMap, float>;

class MlpModel final : public Model {
 public:
  explicit MlpModel(const ModelSpec& spec)
      : spec_(spec), features_(spec.features), hidden_(spec.hidden), classes_(spec.classes) {}

  const ModelSpec& spec() const override { return spec_; }
  size_t numParams() const override {
    return size_t(hidden_ * (features_ + 1) + classes_ * (hidden_ + 1));
  }

  void init(std::span<float> params, Rng& rng) const override {
    if (params.size() != numParams()) throw std::invalid_argument("mlp model: bad init size");
    std::fill(params.begin(), params.end(), 0.0f);
    GradLayers p(params.data(), features_, hidden_, classes_);
    const double s1 = std::sqrt(2.0 / double(features_));  // He: ReLU halves the variance
    const double s2 = std::sqrt(1.0 / double(hidden_));
    for (Eigen::Index i = 0; i < p.w1.size(); ++i) p.w1.data()[i] = float(s1 * gaussian(rng));
    for (Eigen::Index i = 0; i < p.w2.size(); ++i) p.w2.data()[i] = float(s2 * gaussian(rng));
  }

  double lossAndGradient(std::span<const float> params, const Dataset& data,
                         std::span<const size_t> rows, std::span<float> grad) const override {
    checkArguments("mlp", spec_, numParams(), params, data, &grad);
    const RowSelection selection(data, rows);
    const Dataset& batch = selection.get();
    const ConstLayers p(params.data(), features_, hidden_, classes_);
    GradLayers g(grad.data(), features_, hidden_, classes_);
    return visitFeatures(batch, [&](const auto& x) {
      DenseMatrix pre = x * p.w1.transpose();
      pre.rowwise() += p.b1.transpose();
      const DenseMatrix h = pre.cwiseMax(0.0f);
      DenseMatrix z = h * p.w2.transpose();
      z.rowwise() += p.b2.transpose();
      const double loss = softmaxCrossEntropy(z, batch.labels, /*want_grad=*/true);
      g.w2.noalias() = z.transpose() * h;
      g.b2 = z.colwise().sum().transpose();
      // Back through the ReLU: the gradient passes only where the unit was active.
      DenseMatrix dh = z * p.w2;
      dh = (pre.array() > 0.0f).select(dh, 0.0f);
      g.w1.noalias() = dh.transpose() * x;
      g.b1 = dh.colwise().sum().transpose();
      if (spec_.l2 != 0) {
        g.w1 += float(spec_.l2) * p.w1;
        g.w2 += float(spec_.l2) * p.w2;
      }
      return loss + penalty(p);
    });
  }

  double loss(std::span<const float> params, const Dataset& data,
              std::span<const size_t> rows) const override {
    checkArguments("mlp", spec_, numParams(), params, data, nullptr);
    const RowSelection selection(data, rows);
    const Dataset& batch = selection.get();
    const ConstLayers p(params.data(), features_, hidden_, classes_);
    return visitFeatures(batch, [&](const auto& x) {
      DenseMatrix z = logits(x, p);
      return softmaxCrossEntropy(z, batch.labels, /*want_grad=*/false) + penalty(p);
    });
  }

  double accuracy(std::span<const float> params, const Dataset& data) const override {
    checkArguments("mlp", spec_, numParams(), params, data, nullptr);
    const ConstLayers p(params.data(), features_, hidden_, classes_);
    const size_t hits = visitFeatures(
        data, [&](const auto& x) { return countArgmaxHits(logits(x, p), data.labels); });
    return double(hits) / double(data.rows());
  }

  std::optional<double> smoothness(const Dataset& /*data*/) const override { return std::nullopt; }

 private:
  template <class X>
  static DenseMatrix logits(const X& x, const ConstLayers& p) {
    DenseMatrix pre = x * p.w1.transpose();
    pre.rowwise() += p.b1.transpose();
    DenseMatrix z = pre.cwiseMax(0.0f) * p.w2.transpose();
    z.rowwise() += p.b2.transpose();
    return z;
  }

  double penalty(const ConstLayers& p) const {
    if (spec_.l2 == 0) return 0.0;
    return 0.5 * spec_.l2 * (double(p.w1.squaredNorm()) + double(p.w2.squaredNorm()));
  }

  ModelSpec spec_;
  Eigen::Index features_;
  Eigen::Index hidden_;
  Eigen::Index classes_;
};

}  // namespace

std::unique_ptr<Model> makeMlpModel(const ModelSpec& spec) {
  return std::make_unique<MlpModel>(spec);
}

}  // namespace tern::ml::detail
