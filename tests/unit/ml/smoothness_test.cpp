#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <cmath>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "test_support.hpp"

using namespace tern::ml;
using namespace tern::ml::testing;

namespace {

// Hessian of the mean logistic loss + l2/2 |w|^2 in double, from its closed form
// (1/n) sum_i s_i (1 - s_i) [x_i,1][x_i,1]^T + l2 diag(1,...,1,0), written independently of
// the model code.
Eigen::MatrixXd logisticHessian(const Dataset& data, const std::vector<float>& params, double l2) {
  const Eigen::Index d = Eigen::Index(data.features());
  Eigen::MatrixXd h = Eigen::MatrixXd::Zero(d + 1, d + 1);
  const Eigen::MatrixXd x = data.dense.cast<double>();
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    Eigen::VectorXd xa(d + 1);
    xa << x.row(i).transpose(), 1.0;
    double z = 0;
    for (Eigen::Index j = 0; j <= d; ++j) z += xa[j] * params[size_t(j)];
    const double s = 1.0 / (1.0 + std::exp(-z));
    h += s * (1 - s) * xa * xa.transpose();
  }
  h /= double(x.rows());
  for (Eigen::Index j = 0; j < d; ++j) h(j, j) += l2;
  return h;
}

double powerIteration(const std::function<Eigen::VectorXd(const Eigen::VectorXd&)>& apply,
                      Eigen::Index n, int iterations) {
  Eigen::VectorXd v = Eigen::VectorXd::Ones(n).normalized();
  double lambda = 0;
  for (int k = 0; k < iterations; ++k) {
    const Eigen::VectorXd w = apply(v);
    lambda = v.dot(w);
    v = w.normalized();
  }
  return lambda;
}

// Hessian-vector product of the model's loss by central differences of its gradient.
Eigen::VectorXd modelHessianTimes(const Model& model, const std::vector<float>& params,
                                  const Dataset& data, const Eigen::VectorXd& v, double eps) {
  std::vector<float> plus(params), minus(params), gp(params.size()), gm(params.size());
  for (size_t j = 0; j < params.size(); ++j) {
    plus[j] += float(eps * v[Eigen::Index(j)]);
    minus[j] -= float(eps * v[Eigen::Index(j)]);
  }
  model.lossAndGradient(plus, data, {}, gp);
  model.lossAndGradient(minus, data, {}, gm);
  Eigen::VectorXd out(Eigen::Index(params.size()));
  for (size_t j = 0; j < params.size(); ++j) out[Eigen::Index(j)] = (gp[j] - gm[j]) / (2 * eps);
  return out;
}

}  // namespace

TEST_CASE("logistic smoothness bound is at least the largest Hessian eigenvalue") {
  const std::vector<int32_t> positive{1};
  const Dataset data = toBinary(syntheticDense(40, 5, 3, 31), positive);
  const double l2 = 0.05;
  ModelSpec s;
  s.kind = "logistic";
  s.features = 5;
  s.l2 = l2;
  const auto model = makeModel(s);
  const double bound = *model->smoothness(data);

  // The bound itself, from the rows directly: 0.25 * max ||[x,1]||^2 + l2.
  double max_norm2 = 0;
  for (Eigen::Index i = 0; i < data.dense.rows(); ++i) {
    max_norm2 = std::max(max_norm2, data.dense.row(i).cast<double>().squaredNorm() + 1.0);
  }
  CHECK(bound == doctest::Approx(0.25 * max_norm2 + l2));

  // Zero parameters put every sigmoid at 1/2, where the curvature is largest.
  for (const double scale : {0.0, 0.3, 1.0}) {
    CAPTURE(scale);
    const auto params = gaussianParams(model->numParams(), scale, 9);
    const Eigen::MatrixXd h = logisticHessian(data, params, l2);
    const double lambda = powerIteration(
        [&](const Eigen::VectorXd& v) { return Eigen::VectorXd(h * v); }, h.rows(), 500);
    CHECK(lambda == doctest::Approx(
                        Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(h).eigenvalues().maxCoeff())
                        .epsilon(1e-6));
    CHECK(lambda <= bound);
    CHECK(lambda > 0.0);

    // The model's own curvature agrees with the closed-form Hessian used above.
    const Eigen::VectorXd v = Eigen::VectorXd::LinSpaced(h.rows(), -1.0, 1.0).normalized();
    const Eigen::VectorXd hv = modelHessianTimes(*model, params, data, v, 1e-2);
    CHECK((hv - h * v).norm() < 1e-3 + 1e-2 * (h * v).norm());
  }
}

TEST_CASE("softmax smoothness bound is at least the largest curvature seen by power iteration") {
  const Dataset data = syntheticDense(30, 4, 3, 32);
  ModelSpec s;
  s.kind = "softmax";
  s.features = 4;
  s.classes = 3;
  s.l2 = 0.01;
  const auto model = makeModel(s);
  const double bound = *model->smoothness(data);
  for (const double scale : {0.0, 0.5}) {
    CAPTURE(scale);
    const auto params = gaussianParams(model->numParams(), scale, 10);
    const double lambda = powerIteration(
        [&](const Eigen::VectorXd& v) { return modelHessianTimes(*model, params, data, v, 1e-2); },
        Eigen::Index(model->numParams()), 200);
    CHECK(lambda > 0.0);
    CHECK(lambda <= bound);
  }
}

TEST_CASE("mlp reports no closed-form smoothness") {
  ModelSpec s;
  s.kind = "mlp";
  s.features = 3;
  const auto model = makeModel(s);
  CHECK_FALSE(model->smoothness(syntheticDense(5, 3, 2, 1)).has_value());
}
