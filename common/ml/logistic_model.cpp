// Binary logistic regression (labels 0/1): z = X w + b, mean log-loss, L2 on w only (not b).
// Smoothness: each row's Hessian is sigma'(z) [x,1][x,1]^T with sigma' <= 1/4, so
// L <= 0.25 * max_i ||[x_i, 1]||^2 + l2 — the bound CAT uses for its step size 1/L.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/ml/detail/model_support.hpp"
#include "common/ml/model.hpp"

namespace tern::ml::detail {
namespace {

using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;

// log(1 + exp(z)) without overflow for large |z|.
double softplus(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z))); }

float sigmoid(float z) {
  if (z >= 0) return 1.0f / (1.0f + std::exp(-z));
  const float e = std::exp(z);
  return e / (1.0f + e);
}

void checkBinary(int32_t y) {
  if (y != 0 && y != 1) {
    throw std::invalid_argument("logistic model: label " + std::to_string(y) + " is not 0 or 1");
  }
}

class LogisticModel final : public Model {
 public:
  explicit LogisticModel(const ModelSpec& spec) : spec_(spec), features_(spec.features) {}

  const ModelSpec& spec() const override { return spec_; }
  size_t numParams() const override { return size_t(features_) + 1; }

  void init(std::span<float> params, Rng& /*rng*/) const override {
    if (params.size() != numParams()) throw std::invalid_argument("logistic model: bad init size");
    std::fill(params.begin(), params.end(), 0.0f);  // convex loss: zeros are a fine start
  }

  double lossAndGradient(std::span<const float> params, const Dataset& data,
                         std::span<const size_t> rows, std::span<float> grad) const override {
    checkArguments("logistic", spec_, numParams(), params, data, &grad);
    const RowSelection selection(data, rows);
    const Dataset& batch = selection.get();
    const ConstVectorMap w(params.data(), features_);
    const float b = params[size_t(features_)];
    VectorMap gw(grad.data(), features_);
    return visitFeatures(batch, [&](const auto& x) {
      Eigen::VectorXf z = x * w;
      z.array() += b;
      const auto n = double(z.size());
      double total = 0;
      // z becomes the residual (sigma(z) - y) / n, the gradient of the mean loss in z.
      for (Eigen::Index i = 0; i < z.size(); ++i) {
        const int32_t y = batch.labels[size_t(i)];
        checkBinary(y);
        total += softplus(z[i]) - (y ? double(z[i]) : 0.0);
        z[i] = (sigmoid(z[i]) - float(y)) / float(n);
      }
      gw.noalias() = x.transpose() * z;
      if (spec_.l2 != 0) gw += float(spec_.l2) * w;
      grad[size_t(features_)] = z.sum();
      return total / n + penalty(w);
    });
  }

  double loss(std::span<const float> params, const Dataset& data,
              std::span<const size_t> rows) const override {
    checkArguments("logistic", spec_, numParams(), params, data, nullptr);
    const RowSelection selection(data, rows);
    const Dataset& batch = selection.get();
    const ConstVectorMap w(params.data(), features_);
    const float b = params[size_t(features_)];
    return visitFeatures(batch, [&](const auto& x) {
      Eigen::VectorXf z = x * w;
      z.array() += b;  // in fp32 like lossAndGradient, so both report the same loss
      double total = 0;
      for (Eigen::Index i = 0; i < z.size(); ++i) {
        const int32_t y = batch.labels[size_t(i)];
        checkBinary(y);
        total += softplus(z[i]) - (y ? double(z[i]) : 0.0);
      }
      return total / double(z.size()) + penalty(w);
    });
  }

  double accuracy(std::span<const float> params, const Dataset& data) const override {
    checkArguments("logistic", spec_, numParams(), params, data, nullptr);
    const ConstVectorMap w(params.data(), features_);
    const float b = params[size_t(features_)];
    const size_t hits = visitFeatures(data, [&](const auto& x) {
      const Eigen::VectorXf z = x * w;
      size_t count = 0;
      for (Eigen::Index i = 0; i < z.size(); ++i) {
        count += int32_t(z[i] + b > 0) == data.labels[size_t(i)];
      }
      return count;
    });
    return double(hits) / double(data.rows());
  }

  std::optional<double> smoothness(const Dataset& data) const override {
    return 0.25 * maxAugmentedRowNorm2(data) + spec_.l2;
  }

 private:
  double penalty(const ConstVectorMap& w) const {
    return spec_.l2 == 0 ? 0.0 : 0.5 * spec_.l2 * double(w.squaredNorm());
  }

  ModelSpec spec_;
  Eigen::Index features_;
};

}  // namespace

std::unique_ptr<Model> makeLogisticModel(const ModelSpec& spec) {
  return std::make_unique<LogisticModel>(spec);
}

}  // namespace tern::ml::detail
