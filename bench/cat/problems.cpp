#include "problems.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "common/util/rng.hpp"

namespace tern::bench::cat {
namespace {

Problem finish(std::string name, ml::Dataset data) {
  Problem p;
  p.name = std::move(name);
  p.data = std::move(data);
  if (p.data.rows() == 0) throw std::runtime_error(p.name + ": no rows");
  p.l2 = 1.0 / static_cast<double>(p.data.rows());
  ml::ModelSpec spec;
  spec.kind = "logistic";
  spec.features = static_cast<uint32_t>(p.data.features());
  spec.l2 = p.l2;
  p.model = ml::makeModel(spec);
  p.dim = static_cast<uint32_t>(p.model->numParams());
  p.L = *p.model->smoothness(p.data);
  std::vector<float> zero(p.dim, 0.0f);
  p.f0 = p.model->loss(zero, p.data);
  return p;
}

}  // namespace

Problem fashionMnistBinary(const std::string& dir, size_t rows, uint64_t seed) {
  ml::Dataset all =
      ml::readIdx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  const std::vector<int32_t> positive = {5, 6, 7, 8, 9};
  ml::Dataset binary = ml::toBinary(all, positive);
  if (rows > 0 && rows < binary.rows()) {
    std::vector<size_t> order(binary.rows());
    std::iota(order.begin(), order.end(), 0);
    Rng rng(deriveSeed(seed, 0xF00D));
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(rows);
    std::sort(order.begin(), order.end());
    binary = binary.subset(order);
  }
  // Unit-norm rows, as in RCV1 (and the synthetic problem): raw pixel rows differ in norm, and
  // L = 0.25 max ||[x, 1]||^2 would then price every method's step by the brightest image.
  for (Eigen::Index i = 0; i < binary.dense.rows(); ++i) {
    const float norm = binary.dense.row(i).norm();
    if (norm > 0.0f) binary.dense.row(i) /= norm;
  }
  return finish("fmnist-binary", std::move(binary));
}

Problem rcv1LikeSynthetic(uint64_t seed) {
  return finish("rcv1-synthetic", ml::syntheticSparse(20242, 47236, 74, seed));
}

Problem libsvmProblem(const std::string& path) {
  ml::Dataset data = ml::readLibsvm(path);
  if (data.num_classes > 2) {
    const std::vector<int32_t> positive = {0};
    data = ml::toBinary(data, positive);
  }
  const auto slash = path.find_last_of('/');
  return finish("libsvm:" + (slash == std::string::npos ? path : path.substr(slash + 1)),
                std::move(data));
}

void solveOptimum(Problem& problem, size_t max_iterations, double relative_precision) {
  const size_t d = problem.dim;
  std::vector<float> x(d, 0.0f), y(d, 0.0f), x_prev(d, 0.0f), g(d);
  double best = problem.f0;
  double t = 1.0;
  const double step = 1.0 / problem.L;
  size_t it = 0;
  double gnorm = 0.0;
  for (; it < max_iterations; ++it) {
    const double fy = problem.model->lossAndGradient(y, problem.data, {}, g);
    double g2 = 0.0;
    for (float v : g) g2 += double(v) * v;
    gnorm = std::sqrt(g2);
    if (fy < best) best = fy;
    // ||g||^2 / (2 lambda) bounds f - f* where lambda is the strong convexity: stop once that
    // is below relative_precision * (f0 - f).
    if (g2 <= 2.0 * problem.l2 * relative_precision * (problem.f0 - fy)) break;
    x_prev.swap(x);
    for (size_t j = 0; j < d; ++j) x[j] = static_cast<float>(y[j] - step * g[j]);
    // Restart (O'Donoghue & Candes) when the momentum points uphill: g(y) . (x - x_prev) > 0.
    double uphill = 0.0;
    for (size_t j = 0; j < d; ++j) uphill += double(g[j]) * (double(x[j]) - x_prev[j]);
    double t_next = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t));
    double beta = (t - 1.0) / t_next;
    if (uphill > 0.0) {
      t_next = 1.0;
      beta = 0.0;
    }
    for (size_t j = 0; j < d; ++j)
      y[j] = static_cast<float>(x[j] + beta * (double(x[j]) - x_prev[j]));
    t = t_next;
  }
  const double fx = problem.model->loss(x, problem.data);
  problem.fstar = std::min(best, fx);
  problem.xstar = x;
  problem.fstar_iterations = it;
  problem.fstar_gradient_norm = gnorm;
}

}  // namespace tern::bench::cat
