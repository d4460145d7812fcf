#include "server/robust_aggregation.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/util/float_passes.hpp"

namespace tern::server {

double shareCap(double configured, size_t pushers) {
  if (configured > 0.0) return configured;
  return pushers == 0 ? 1.0 : std::max(0.5, 2.0 / double(pushers));
}

PushWeights cappedWeights(const std::vector<uint64_t>& samples, double max_share) {
  PushWeights w;
  double total = 0.0;
  for (uint64_t s : samples) total += double(s);
  for (uint64_t s : samples) w.weights.push_back(double(s));
  w.normaliser = total;
  const size_t n = samples.size();
  const bool over = std::any_of(samples.begin(), samples.end(),
                                [&](uint64_t s) { return double(s) / total > max_share; });
  if (n == 0 || !(total > 0.0) || !over) return w;
  w.capped = true;
  w.normaliser = 1.0;
  if (double(n) * max_share < 1.0) {
    std::fill(w.weights.begin(), w.weights.end(), 1.0 / double(n));
    return w;
  }
  // Water-filling: fix the shares over the cap at the cap, spread the rest in proportion.
  std::vector<bool> fixed(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    double free_samples = 0.0, left = 1.0;
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i])
        left -= max_share;
      else
        free_samples += double(samples[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i]) {
        w.weights[i] = max_share;
        continue;
      }
      w.weights[i] = free_samples > 0.0 ? left * double(samples[i]) / free_samples : 0.0;
      if (w.weights[i] > max_share) fixed[i] = changed = true;
    }
  }
  return w;
}

double pushNorm(const compression::SparseGradient& g) {
  return std::sqrt(laneSumOfSquares(g.values));
}

std::optional<double> lowerMedianNonZero(std::vector<double> norms) {
  std::erase_if(norms, [](double x) { return !(x > 0.0); });
  if (norms.empty()) return std::nullopt;
  const size_t k = (norms.size() - 1) / 2;
  std::nth_element(norms.begin(), norms.begin() + std::ptrdiff_t(k), norms.end());
  return norms[k];
}

bool clipTo(compression::SparseGradient& g, double norm, double bound) {
  if (!(norm > bound)) return false;
  const double scale = bound / norm;
  for (float& v : g.values) v = float(double(v) * scale);
  return true;
}

double trimmedMean(std::vector<float> values, double trim) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t cut = size_t(std::floor(trim * double(values.size())));
  double sum = 0.0;
  for (size_t i = cut; i + cut < values.size(); ++i) sum += double(values[i]);
  return sum / double(values.size() - 2 * cut);
}

double median(std::vector<float> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t m = values.size();
  return m % 2 ? double(values[m / 2]) : 0.5 * (double(values[m / 2 - 1]) + double(values[m / 2]));
}

std::vector<float> robustAggregate(const std::vector<const compression::SparseGradient*>& pushes,
                                   size_t dim, config::RobustRule rule, double trim) {
  std::vector<std::vector<float>> sent(dim);
  for (const auto* g : pushes) {
    for (size_t k = 0; k < g->values.size(); ++k) {
      const size_t j = g->isDense() ? k : g->indices[k];
      if (j < dim) sent[j].push_back(g->values[k]);
    }
  }
  std::vector<float> out(dim, 0.0f);
  const double n = double(pushes.size());
  for (size_t j = 0; j < dim; ++j) {
    if (sent[j].empty()) continue;
    const double share = double(sent[j].size()) / n;
    const double stat = rule == config::RobustRule::kMedian ? median(std::move(sent[j]))
                                                            : trimmedMean(std::move(sent[j]), trim);
    out[j] = float(stat * share);
  }
  return out;
}

}  // namespace tern::server
