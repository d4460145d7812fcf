// Multinomial logistic regression: logits = X W^T + b, mean cross-entropy, L2 on W only
// (penalising the bias would pull the class priors towards uniform for no gain).
// Smoothness: the softmax Hessian in the logits is at most 1/2 in spectral norm (Bohning), so
// L <= 0.5 * max_i ||[x_i, 1]||^2 + l2.
#include <stdexcept>

#include "common/ml/detail/model_support.hpp"
#include "common/ml/model.hpp"

namespace tern::ml::detail {
namespace {

using ConstMatrixMap = Eigen::Map<const DenseMatrix>;
using MatrixMap = Eigen::Map<DenseMatrix>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;

class SoftmaxModel final : public Model {
 public:
  explicit SoftmaxModel(const ModelSpec& spec)
      : spec_(spec), classes_(spec.classes), features_(spec.features) {}

  const ModelSpec& spec() const override { return spec_; }
  size_t numParams() const override { return size_t(classes_) * (size_t(features_) + 1); }

  void init(std::span<float> params, Rng& /*rng*/) const override {
    if (params.size() != numParams()) throw std::invalid_argument("softmax model: bad init size");
    std::fill(params.begin(), params.end(), 0.0f);  // the loss is convex: zeros are a fine start
  }

  double lossAndGradient(std::span<const float> params, const Dataset& data,
                         std::span<const size_t> rows, std::span<float> grad) const override {
    checkArguments("softmax", spec_, numParams(), params, data, &grad);
    const RowSelection selection(data, rows);
    const Dataset& batch = selection.get();
    const ConstMatrixMap w(params.data(), classes_, features_);
    const ConstVectorMap b(params.data() + w.size(), classes_);
    MatrixMap gw(grad.data(), classes_, features_);
    VectorMap gb(grad.data() + w.size(), classes_);
    return visitFeatures(batch, [&](const auto& x) {
      DenseMatrix z = logits(x, w, b);
      const double loss = softmaxCrossEntropy(z, batch.labels, /*want_grad=*/true);
      gw.noalias() = z.transpose() * x;
      gb = z.colwise().sum().transpose();
      if (spec_.l2 != 0) gw += float(spec_.l2) * w;
      return loss + penalty(w);
    });
  }

  double loss(std::span<const float> params, const Dataset& data,
              std::span<const size_t> rows) const override {
    checkArguments("softmax", spec_, numParams(), params, data, nullptr);
    const RowSelection selection(data, rows);
    const Dataset& batch = selection.get();
    const ConstMatrixMap w(params.data(), classes_, features_);
    const ConstVectorMap b(params.data() + w.size(), classes_);
    return visitFeatures(batch, [&](const auto& x) {
      DenseMatrix z = logits(x, w, b);
      return softmaxCrossEntropy(z, batch.labels, /*want_grad=*/false) + penalty(w);
    });
  }

  double accuracy(std::span<const float> params, const Dataset& data) const override {
    checkArguments("softmax", spec_, numParams(), params, data, nullptr);
    const ConstMatrixMap w(params.data(), classes_, features_);
    const ConstVectorMap b(params.data() + w.size(), classes_);
    const size_t hits = visitFeatures(
        data, [&](const auto& x) { return countArgmaxHits(logits(x, w, b), data.labels); });
    return double(hits) / double(data.rows());
  }

  std::optional<double> smoothness(const Dataset& data) const override {
    return 0.5 * maxAugmentedRowNorm2(data) + spec_.l2;
  }

 private:
  template <class X>
  static DenseMatrix logits(const X& x, const ConstMatrixMap& w, const ConstVectorMap& b) {
    DenseMatrix z = x * w.transpose();
    z.rowwise() += b.transpose();
    return z;
  }

  double penalty(const ConstMatrixMap& w) const {
    return spec_.l2 == 0 ? 0.0 : 0.5 * spec_.l2 * double(w.squaredNorm());
  }

  ModelSpec spec_;
  Eigen::Index classes_;
  Eigen::Index features_;
};

}  // namespace

std::unique_ptr<Model> makeSoftmaxModel(const ModelSpec& spec) {
  return std::make_unique<SoftmaxModel>(spec);
}

}  // namespace tern::ml::detail
