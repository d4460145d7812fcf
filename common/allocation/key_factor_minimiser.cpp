#include "common/allocation/key_factor_minimiser.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tern::allocation {

namespace {

std::vector<double> levels(const KeyFactorProblem& problem) {
  std::vector<double> q(problem.shares.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    const double r = problem.shares[i] / problem.weights[i];
    q[i] = std::cbrt(r * r);
  }
  return q;
}

std::vector<double> fillAt(const KeyFactorProblem& problem, const std::vector<double>& q,
                           double floor) {
  const std::size_t n = q.size();
  auto spend = [&](double c) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      s += problem.weights[i] * std::clamp(c * q[i], floor, problem.upper[i]);
    }
    return s;
  };
  // spend(c) is non-decreasing and linear between the points where a worker leaves the floor
  // (c = m / q_i) or reaches its cap (c = u_i / q_i): bisect over those points for the piece
  // that holds the budget, then solve the piece exactly. Exactness matters because the outer
  // search compares Phi values that differ in the last digits near the optimum.
  std::vector<double> points;
  points.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    if (q[i] > 0.0) {
      points.push_back(floor / q[i]);
      points.push_back(problem.upper[i] / q[i]);
    }
  }
  std::sort(points.begin(), points.end());
  double c = 0.0;
  if (!points.empty()) {
    if (spend(points.back()) <= problem.budget) {
      c = points.back();
    } else {
      std::size_t lo = 0;
      std::size_t hi = points.size() - 1;  // invariant: spend(points[hi]) > budget
      if (spend(points[0]) > problem.budget) {
        c = 0.0;  // only if the floor alone overspends, which callers exclude
      } else {
        while (hi - lo > 1) {
          const std::size_t mid = lo + (hi - lo) / 2;
          if (spend(points[mid]) <= problem.budget) {
            lo = mid;
          } else {
            hi = mid;
          }
        }
        const double s_lo = spend(points[lo]);
        const double s_hi = spend(points[hi]);
        c = points[lo] + (problem.budget - s_lo) * (points[hi] - points[lo]) / (s_hi - s_lo);
      }
    }
  }
  std::vector<double> ratios(n);
  for (std::size_t i = 0; i < n; ++i) ratios[i] = std::clamp(c * q[i], floor, problem.upper[i]);
  return ratios;
}

// The objective with the floor as a free variable: F(m, delta) = sum_i p_i / sqrt(m * delta_i).
// Phi(delta) = F(min delta, delta), and F(m, delta) >= Phi(delta) for any m <= min delta.
double objective(const KeyFactorProblem& problem, const std::vector<double>& ratios, double floor) {
  double sum = 0.0;
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    sum += problem.shares[i] / std::sqrt(ratios[i]);
  }
  return sum / std::sqrt(floor);
}

}  // namespace

std::vector<double> waterFill(const KeyFactorProblem& problem, double floor) {
  return fillAt(problem, levels(problem), floor);
}

std::vector<double> minimiseKeyFactor(const KeyFactorProblem& problem) {
  const std::size_t n = problem.shares.size();
  if (n == 0) return {};
  double capacity = 0.0;
  double weight_sum = 0.0;
  double lowest_cap = 1.0;
  for (std::size_t i = 0; i < n; ++i) {
    capacity += problem.weights[i] * problem.upper[i];
    weight_sum += problem.weights[i];
    lowest_cap = std::min(lowest_cap, problem.upper[i]);
  }
  if (problem.budget >= capacity) return problem.upper;

  const std::vector<double> q = levels(problem);
  auto value = [&](double floor) { return objective(problem, fillAt(problem, q, floor), floor); };

  // Why a golden-section search over the floor is exact here: F(m, delta) is jointly convex
  // ((m * delta_i)^(-1/2) is the reciprocal of a geometric mean), the constraints
  // m <= delta_i <= u_i and sum_i w_i delta_i = B are linear, so g(m) = min_delta F(m, delta)
  // is convex in m, hence unimodal, also after the monotone change of variable x = log m used
  // to search across orders of magnitude. min Phi = min_m g(m).
  // Bracket: n * m <= B and m <= u_i give the top. Since delta_i <= 1 and sum_i p_i = 1,
  // g(m) >= 1 / sqrt(m), so any m below 1 / g(top)^2 is beaten by the top.
  const double top = std::min(lowest_cap, problem.budget / weight_sum);
  const double top_value = value(top);
  double share_sum = 0.0;
  for (double p : problem.shares) share_sum += p;
  const double bottom = std::min(top, std::max(std::pow(share_sum / top_value, 2.0), top * 1e-300));

  constexpr double kInvGolden = 0.6180339887498949;
  double a = std::log(bottom);
  double b = std::log(top);
  double x1 = b - kInvGolden * (b - a);
  double x2 = a + kInvGolden * (b - a);
  double f1 = value(std::exp(x1));
  double f2 = value(std::exp(x2));
  for (int iter = 0; iter < 200 && b - a > 1e-13; ++iter) {
    if (f1 <= f2) {
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - kInvGolden * (b - a);
      f1 = value(std::exp(x1));
    } else {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + kInvGolden * (b - a);
      f2 = value(std::exp(x2));
    }
  }
  // The optimum often sits on the top end (equal shares: the uniform allocation), which the
  // interior probes only approach; compare against it explicitly.
  double best_floor = f1 <= f2 ? std::exp(x1) : std::exp(x2);
  if (top_value <= std::min(f1, f2)) best_floor = top;
  return fillAt(problem, q, best_floor);
}

}  // namespace tern::allocation
