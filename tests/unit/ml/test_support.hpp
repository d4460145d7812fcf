#pragma once
// Helpers for the ml unit tests: scratch files, exception messages, random parameters and the
// central finite-difference gradient check.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "common/util/rng.hpp"

namespace tern::ml::testing {

// A directory removed at scope exit; the pid keeps parallel test processes apart.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("tern_ml_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = file(name);
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

// The what() of the std::runtime_error thrown by f, or "" when nothing (or something else) is
// thrown, so a test can check what the message names.
inline std::string runtimeErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  } catch (...) {
    return "<unexpected exception type>";
  }
  return "";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline std::vector<float> gaussianParams(size_t n, double scale, uint64_t seed) {
  Rng rng(seed);
  std::normal_distribution<double> g(0.0, scale);
  std::vector<float> p(n);
  for (auto& v : p) v = float(g(rng));
  return p;
}

// Compares the model's gradient with central differences of its loss, coordinate by
// coordinate. The step is the float distance actually moved, so rounding of p +- h does not
// bias the quotient. With fp32 losses of size O(1), rounding contributes about 1e-7/h to each
// difference quotient and truncation about h^2 times the third derivative, so h = 1e-2 with an
// absolute tolerance of 2e-3 plus 2% relative leaves a margin of ~10x on both.
inline void checkGradient(const Model& model, std::vector<float> params, const Dataset& data,
                          std::span<const size_t> rows, double h = 1e-2, double atol = 2e-3,
                          double rtol = 2e-2) {
  std::vector<float> grad(model.numParams());
  const double at = model.lossAndGradient(params, data, rows, grad);
  CHECK(at == doctest::Approx(model.loss(params, data, rows)).epsilon(1e-6));
  size_t checked = 0;
  for (size_t j = 0; j < params.size(); ++j) {
    const float original = params[j];
    params[j] = original + float(h);
    const double step_up = double(params[j]) - original;
    const double up = model.loss(params, data, rows);
    params[j] = original - float(h);
    const double step_down = double(original) - params[j];
    const double down = model.loss(params, data, rows);
    params[j] = original;
    const double numeric = (up - down) / (step_up + step_down);
    const double analytic = grad[j];
    const double tol = atol + rtol * std::max(std::abs(numeric), std::abs(analytic));
    if (std::abs(numeric - analytic) > tol) {
      FAIL_CHECK("coordinate " << j << ": analytic " << analytic << " vs numeric " << numeric);
    }
    ++checked;
  }
  CHECK(checked == model.numParams());
  // Guard against a vacuous pass: the tolerance must be small next to the gradient itself.
  double largest = 0;
  for (float g : grad) largest = std::max(largest, double(std::abs(g)));
  CHECK(largest > 20 * atol);
}

inline Dataset densified(const Dataset& sparse) {
  Dataset d = sparse;
  d.is_sparse = false;
  d.dense = DenseMatrix(sparse.sparse);
  d.sparse = SparseMatrix();
  return d;
}

}  // namespace tern::ml::testing
