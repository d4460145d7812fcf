#pragma once
// The noise of stochastic sparsification (docs/cat.md, method) at every level T of one
// vector v: Q keeps coordinate j with probability p_j = min(1, lambda |v_j|), sum_j p_j = T,
// and sends v_j / p_j, independently per coordinate, so Var(Q_j) = v_j^2 (1/p_j - 1). For
// weights w_j >= 0 the priced noise is sum_j w_j Var(Q_j) = E[(Q - v)^T diag(w) (Q - v)]; for
// any M with that diagonal, E[(Q - v)^T M (Q - v)] is the same (the coordinates' noise is
// independent and zero-mean). With every w_j = L this is L ||v||^2 (1/omega(T) - 1), the
// descent lemma's price under which omega(T) / L is the best step; with w_j = M_jj of a matrix
// that bounds the Hessian (M >= H everywhere, L >= M's largest eigenvalue) the bound becomes
// E f(x - gamma Q) <= f - gamma S + gamma^2 (L S + P) / 2, S = ||v||^2, P the priced noise.
#include <cstdint>
#include <span>
#include <vector>

namespace tern::tuning {

class NoisePrice {
 public:
  // One weight per coordinate, each finite and >= 0.
  explicit NoisePrice(std::vector<double> weights);

  // Sorts |v| once (O(d log d)); v must be finite and as long as the weights.
  void prepare(std::span<const float> v);

  struct Noise {
    double raw = 0.0;     // sum_j Var(Q_j)
    double priced = 0.0;  // sum_j w_j Var(Q_j)
  };
  // At expected count T >= 1 (O(log T)); zero once T reaches the number of non-zeros.
  Noise at(uint32_t T) const;

 private:
  std::vector<double> weights_;
  std::vector<uint32_t> order_;
  // Magnitudes in decreasing order, and sums over the positions from r on.
  std::vector<double> mag_, tail_a_, tail_a2_, tail_wa_, tail_wa2_;
  size_t nonzeros_ = 0;
};

}  // namespace tern::tuning
