#pragma once
// Seeded test vectors with the shapes gradients take: Gaussian, heavy-tailed, mostly zero, and
// full of ties (the cases where a tie-break or an early stop would go wrong).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/util/rng.hpp"

namespace tern::tuning::testing {

enum class Shape { kGaussian, kHeavyTailed, kMostlyZero, kTies };

inline std::string shapeName(Shape s) {
  switch (s) {
    case Shape::kGaussian:
      return "gaussian";
    case Shape::kHeavyTailed:
      return "heavy-tailed";
    case Shape::kMostlyZero:
      return "mostly-zero";
    case Shape::kTies:
      return "ties";
  }
  return "?";
}

inline std::vector<float> randomVector(size_t d, Shape shape, Rng& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<float> v(d);
  for (auto& x : v) {
    const double sign = unif(rng) < 0.5 ? -1.0 : 1.0;
    switch (shape) {
      case Shape::kGaussian:
        x = static_cast<float>(normal(rng));
        break;
      case Shape::kHeavyTailed:  // Pareto with tail index 1.5: a few coordinates dominate
        x = static_cast<float>(sign * std::pow(1.0 - unif(rng), -1.0 / 1.5) * 1e-3);
        break;
      case Shape::kMostlyZero:
        x = unif(rng) < 0.9 ? 0.0f : static_cast<float>(normal(rng));
        break;
      case Shape::kTies:
        x = static_cast<float>(sign * (1 + static_cast<int>(unif(rng) * 3)));
        break;
    }
  }
  return v;
}

inline const std::vector<Shape>& allShapes() {
  static const std::vector<Shape> shapes = {Shape::kGaussian, Shape::kHeavyTailed,
                                            Shape::kMostlyZero, Shape::kTies};
  return shapes;
}

}  // namespace tern::tuning::testing
