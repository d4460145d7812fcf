#pragma once
// The reproduction's problems (issue 4): L2-regularised binary logistic regression, L known in
// closed form, on Fashion-MNIST as a binary task, on a seeded sparse synthetic problem with
// RCV1's statistics, or on any LIBSVM file; f* from a long accelerated full-gradient run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"

namespace tern::bench::cat {

struct Problem {
  std::string name;
  ml::Dataset data;
  std::unique_ptr<ml::Model> model;
  uint32_t dim = 0;          // parameters (features + bias)
  double l2 = 0.0;           // lambda = 1 / n
  double L = 0.0;            // smoothness bound of the model on this data
  double f0 = 0.0;           // f(0)
  double fstar = 0.0;        // from solveOptimum
  std::vector<float> xstar;  // the point solveOptimum ended at
  size_t fstar_iterations = 0;
  double fstar_gradient_norm = 0.0;
};

// Fashion-MNIST training set from the IDX files in `dir`, labels >= 5 (sandal, shirt, sneaker,
// bag, ankle boot) against < 5, rows scaled to unit norm. rows > 0 keeps a seeded random subset
// of that many rows.
Problem fashionMnistBinary(const std::string& dir, size_t rows, uint64_t seed);
// d = 47,236, n = 20,242, 74 non-zeros per row, power-law popularity, unit-norm rows.
Problem rcv1LikeSynthetic(uint64_t seed);
// Any LIBSVM file (labels mapped to 0/1 by the reader; more classes: class 0 against the rest).
Problem libsvmProblem(const std::string& path);

// Nesterov's accelerated gradient with step 1/L and gradient-based adaptive restart, run until
// ||grad||^2 / (2 lambda) <= relative_precision * (f0 - f) or max_iterations; sets fstar to the
// lowest objective seen.
void solveOptimum(Problem& problem, size_t max_iterations, double relative_precision);

}  // namespace tern::bench::cat
