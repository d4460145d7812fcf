#include "common/allocation/budget.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace tern::allocation {

namespace {

// Ratios computed in floating point land a hair below an integer count (0.03 * 1000 =
// 29.999999999999996); this slack keeps such counts from losing a whole coordinate.
constexpr double kRoundingSlack = 1e-12;

// The whole coordinates in a count computed in floating point.
double wholeCoordinates(double coordinates) {
  return std::floor(coordinates + kRoundingSlack * std::max(1.0, coordinates));
}

}  // namespace

std::vector<double> normalisedShares(const std::vector<WorkerLoad>& workers) {
  std::vector<double> shares(workers.size());
  double largest = 0.0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const double p = workers[i].share;
    if (!std::isfinite(p) || p < 0.0) {
      throw std::invalid_argument("allocation: worker " + std::to_string(i) +
                                  " has an invalid data share " + std::to_string(p));
    }
    shares[i] = p;
    largest = std::max(largest, p);
  }
  // Scaled by the largest first, so that a sum of huge shares cannot overflow.
  double total = 0.0;
  if (largest > 0.0) {
    for (double& p : shares) {
      p /= largest;
      total += p;
    }
  }
  if (total <= 0.0) {
    std::fill(shares.begin(), shares.end(), workers.empty() ? 0.0 : 1.0 / workers.size());
    return shares;
  }
  for (double& p : shares) p /= total;
  return shares;
}

double totalRatioBudget(std::size_t n, uint32_t dim, const Budget& budget) {
  if (dim == 0) throw std::invalid_argument("allocation: model dimension must be positive");
  double total = 0.0;
  if (budget.bytes_per_round > 0.0) {
    if (!(budget.bytes_per_coordinate > 0.0) || !(budget.bytes_per_push >= 0.0)) {
      throw std::invalid_argument(
          "allocation: bytes_per_coordinate must be positive and bytes_per_push >= 0");
    }
    // Every push pays its fixed bytes first; what is left buys coordinates (none when the
    // fixed bytes alone exceed the budget: every worker then gets the floor of one).
    const double for_coordinates =
        std::max(0.0, budget.bytes_per_round - static_cast<double>(n) * budget.bytes_per_push);
    total = for_coordinates / (static_cast<double>(dim) * budget.bytes_per_coordinate);
  } else if (budget.mean_ratio > 0.0 && std::isfinite(budget.mean_ratio)) {
    total = static_cast<double>(n) * budget.mean_ratio;
  } else {
    throw std::invalid_argument(
        "allocation: the budget needs a positive mean_ratio or bytes_per_round");
  }
  if (!std::isfinite(total)) throw std::invalid_argument("allocation: budget is not finite");
  return std::min(total, static_cast<double>(n));
}

std::vector<uint32_t> roundCaps(const std::vector<double>& ratios, uint32_t dim,
                                const std::vector<double>& cost_per_coordinate, double limit,
                                const std::vector<uint32_t>& upper) {
  return roundCaps(ratios, std::vector<uint32_t>(ratios.size(), dim), cost_per_coordinate, limit,
                   upper);
}

std::vector<uint32_t> roundCaps(const std::vector<double>& ratios,
                                const std::vector<uint32_t>& dims,
                                const std::vector<double>& cost_per_coordinate, double limit,
                                const std::vector<uint32_t>& upper) {
  const std::size_t n = ratios.size();
  std::vector<uint32_t> caps(n);
  std::vector<double> exact(n);
  const double allowed = limit * (1.0 + 1e-12);
  // A worker whose one coordinate alone costs more than the whole budget (a stalled link) can
  // be within no budget: it gets the floor of one coordinate, which is not charged, so that it
  // does not take the others' caps down to one for nothing.
  std::vector<bool> excused(n);
  double spent = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t hi = std::clamp<uint32_t>(upper[i], 1, dims[i]);
    const double r = std::isfinite(ratios[i]) ? std::clamp(ratios[i], 0.0, 1.0) : 0.0;
    exact[i] = r * dims[i];
    excused[i] = !(cost_per_coordinate[i] <= allowed);
    const double down = std::floor(exact[i] * (1.0 + kRoundingSlack));
    caps[i] =
        excused[i] ? 1 : static_cast<uint32_t>(std::clamp(down, 1.0, static_cast<double>(hi)));
    if (!excused[i]) spent += cost_per_coordinate[i] * caps[i];
  }

  // Lifting tiny ratios to one coordinate may overspend; take it back from the largest caps,
  // where one coordinate less is the smallest relative loss.
  while (spent > allowed) {
    std::size_t victim = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (!excused[i] && caps[i] > 1 && (victim == n || caps[i] > caps[victim])) victim = i;
    }
    if (victim == n) break;  // every cap is already 1: the budget cannot be met
    --caps[victim];
    spent -= cost_per_coordinate[victim];
  }

  // Hand the rounding leftovers to the largest remainders, as far as the budget allows.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return exact[a] - caps[a] > exact[b] - caps[b];
  });
  for (std::size_t i : order) {
    if (exact[i] - caps[i] <= 0.0) break;
    const uint32_t hi = std::clamp<uint32_t>(upper[i], 1, dims[i]);
    if (!excused[i] && caps[i] < hi && spent + cost_per_coordinate[i] <= allowed) {
      ++caps[i];
      spent += cost_per_coordinate[i];
    }
  }
  return caps;
}

std::vector<uint32_t> roundCapsToVolume(const std::vector<double>& ratios, uint32_t dim,
                                        double total_ratio) {
  const double limit = wholeCoordinates(total_ratio * dim);
  return roundCaps(ratios, dim, std::vector<double>(ratios.size(), 1.0), limit,
                   std::vector<uint32_t>(ratios.size(), dim));
}

std::vector<double> clipAndRedistribute(const std::vector<double>& ratios, double total_ratio) {
  return clipAndRedistribute(ratios, std::vector<double>(ratios.size(), 1.0), total_ratio);
}

std::vector<double> clipAndRedistribute(const std::vector<double>& ratios,
                                        const std::vector<double>& weights, double total) {
  const std::size_t n = ratios.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return ratios[a] > ratios[b]; });
  // With the u largest clipped to 1, the rest scale by s = (T - their weights) / (the rest's
  // weighted sum); the right u is the first for which the largest unclipped ratio stays <= 1
  // after scaling.
  double rest = 0.0;
  for (std::size_t i = 0; i < n; ++i) rest += weights[i] * ratios[i];
  double clipped = 0.0;
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = std::min(ratios[i], 1.0);
  for (std::size_t u = 0; u < n; ++u) {
    const double remaining = total - clipped;
    if (rest <= 0.0 || remaining <= 0.0) break;  // only zero ratios left: nothing to scale
    const double scale = remaining / rest;
    if (scale * ratios[order[u]] <= 1.0) {
      for (std::size_t k = u; k < n; ++k) out[order[k]] = scale * ratios[order[k]];
      return out;
    }
    out[order[u]] = 1.0;
    rest -= weights[order[u]] * ratios[order[u]];
    clipped += weights[order[u]];
  }
  return out;
}

PushPrice pushPrice(const WorkerLoad& worker, const Budget& budget) {
  if (worker.price && worker.price->per_coordinate > 0.0) return *worker.price;
  return {budget.bytes_per_push, budget.bytes_per_coordinate};
}

bool pricedApart(const std::vector<WorkerLoad>& workers, const Budget& budget) {
  for (const WorkerLoad& w : workers) {
    const PushPrice p = pushPrice(w, budget);
    if (p.per_coordinate != budget.bytes_per_coordinate || p.per_push != budget.bytes_per_push) {
      return true;
    }
  }
  return false;
}

bool VolumeBudget::unitWeights() const {
  return std::all_of(weights.begin(), weights.end(), [](double w) { return w == 1.0; });
}

double VolumeBudget::weightSum() const {
  return std::accumulate(weights.begin(), weights.end(), 0.0);
}

double VolumeBudget::coordinateLimit(uint32_t dim) const {
  const double coordinates = total * dim;
  return unitWeights() ? wholeCoordinates(coordinates) : coordinates;
}

VolumeBudget volumeBudget(const std::vector<WorkerLoad>& workers, uint32_t dim,
                          const Budget& budget) {
  const std::size_t n = workers.size();
  VolumeBudget out;
  out.weights.assign(n, 1.0);
  if (!(budget.bytes_per_round > 0.0) || !pricedApart(workers, budget)) {
    out.total = totalRatioBudget(n, dim, budget);
    return out;
  }
  if (dim == 0) throw std::invalid_argument("allocation: model dimension must be positive");
  if (!(budget.bytes_per_coordinate > 0.0)) {
    throw std::invalid_argument("allocation: bytes_per_coordinate must be positive");
  }
  double fixed = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const PushPrice p = pushPrice(workers[i], budget);
    if (!(p.per_coordinate > 0.0) || !std::isfinite(p.per_coordinate) || !(p.per_push >= 0.0) ||
        !std::isfinite(p.per_push)) {
      throw std::invalid_argument("allocation: worker " + std::to_string(i) +
                                  " has an invalid price per push or per coordinate");
    }
    out.weights[i] = p.per_coordinate / budget.bytes_per_coordinate;
    fixed += p.per_push;
  }
  // As for one price: every push pays its fixed bytes first, what is left buys coordinates.
  const double for_coordinates = std::max(0.0, budget.bytes_per_round - fixed);
  out.total = for_coordinates / (static_cast<double>(dim) * budget.bytes_per_coordinate);
  if (!std::isfinite(out.total)) throw std::invalid_argument("allocation: budget is not finite");
  out.total = std::min(out.total, out.weightSum());
  return out;
}

std::vector<uint32_t> roundCapsToBudget(const std::vector<double>& ratios, uint32_t dim,
                                        const VolumeBudget& volume) {
  if (volume.unitWeights()) return roundCapsToVolume(ratios, dim, volume.total);
  return roundCaps(ratios, dim, volume.weights, volume.coordinateLimit(dim),
                   std::vector<uint32_t>(ratios.size(), dim));
}

double roundPushCost(const PushPrice& price, const Budget& budget, uint32_t k) {
  if (!(budget.bytes_per_round > 0.0)) return static_cast<double>(k);
  return price.per_push + price.per_coordinate * static_cast<double>(k);
}

double roundLimit(std::size_t n, uint32_t dim, const Budget& budget) {
  if (budget.bytes_per_round > 0.0) return budget.bytes_per_round;
  return wholeCoordinates(totalRatioBudget(n, dim, budget) * dim);
}

uint32_t capWithinRound(const PushPrice& price, const Budget& budget, uint32_t wanted, double spent,
                        double limit) {
  const bool bytes = budget.bytes_per_round > 0.0;
  const double fixed = bytes ? price.per_push : 0.0;
  const double per_coordinate = bytes ? price.per_coordinate : 1.0;
  const double room = (limit - spent - fixed) / per_coordinate;
  // The slack keeps a cap that lands exactly on the limit from rounding below it.
  const double fit = std::floor(room * (1.0 + kRoundingSlack));
  if (!(fit >= 1.0)) return 0;
  return static_cast<uint32_t>(std::min(fit, static_cast<double>(std::max<uint32_t>(wanted, 1))));
}

}  // namespace tern::allocation
