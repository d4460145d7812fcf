#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"
#include "common/allocation/key_factor_minimiser.hpp"
#include "common/allocation/link_costs.hpp"
#include "common/allocation/unit_refinement.hpp"

namespace tern::allocation {

namespace {

// The full model in each worker's pricing units, and the most units each may send within the
// deadline (0 = no deadline). Under a link-seconds budget the units are the links' (coordinates,
// or each worker's whole packets with Budget::whole_packets); else coordinates.
struct UnitPlan {
  std::vector<Packing> packing;
  std::vector<uint32_t> units;
  std::vector<uint32_t> upper;

  // Worker i's units for ratio r of the model, fractional. Whole packets: m packets hold about
  // (m P - push) / c coordinates, so ratio r takes (r d c + push) / P packets, affine in r (the
  // pushes' fixed bytes come off the budget first); priced by the coordinate, r d units.
  double fractionalUnits(std::size_t i, double r, uint32_t dim) const {
    const Packing& pk = packing[i];
    if (!(pk.packet_bytes > 0.0)) return r * units[i];
    return (r * dim * pk.coordinate_bytes + pk.push_bytes) / pk.packet_bytes;
  }
};

UnitPlan unitPlan(std::size_t n, uint32_t dim, const Budget& budget, const LinkCosts& links,
                  double deadline, bool seconds) {
  UnitPlan plan;
  plan.packing.resize(n);
  if (seconds) plan.packing = links.packing;
  plan.units.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    plan.units[i] = static_cast<uint32_t>(plan.packing[i].unitsFor(dim));
  }
  plan.upper = plan.units;
  if (links.known && deadline > 0.0) {
    Budget bounded = budget;
    bounded.deadline_seconds = deadline;
    for (std::size_t i = 0; i < n; ++i) {
      plan.upper[i] = deadlineUnits(links, i, plan.units[i], bounded);
    }
  }
  return plan;
}

// What one unit of each worker spends from the budget, and the budget's limit on the units.
struct UnitPrices {
  std::vector<double> cost_per_unit;
  double limit = 0.0;
};

// Prices the problem in link seconds: sum_i c_i * delta_i * units_i <= seconds, so the Lagrangian
// puts delta_i ~ (p_i / w_i)^(2/3) with w_i = c_i * units_i, the seconds of worker i's model.
UnitPrices priceSeconds(const UnitPlan& plan, uint32_t dim, const Budget& budget,
                        const LinkCosts& links, KeyFactorProblem& problem) {
  const std::size_t n = plan.units.size();
  problem.weights.resize(n);
  double fixed_seconds = 0.0;  // what the pushes' fixed bytes take of whole packets
  for (std::size_t i = 0; i < n; ++i) {
    problem.weights[i] =
        links.per_unit[i] * (plan.fractionalUnits(i, 1.0, dim) - plan.fractionalUnits(i, 0.0, dim));
    fixed_seconds += links.per_unit[i] * plan.fractionalUnits(i, 0.0, dim);
  }
  problem.budget =
      std::max(budget.seconds_per_round - fixed_seconds, 1e-9 * budget.seconds_per_round);
  return {links.per_unit, budget.seconds_per_round};
}

// Prices the problem by volume: a worker's coordinates at its bytes per coordinate; the links
// then matter only through the deadline caps, and without a deadline this is dagc-opt.
UnitPrices priceVolume(const std::vector<WorkerLoad>& workers, uint32_t dim, const Budget& budget,
                       KeyFactorProblem& problem) {
  const VolumeBudget volume = volumeBudget(workers, dim, budget);
  problem.weights = volume.weights;
  problem.budget = volume.total;
  return {volume.weights, volume.coordinateLimit(dim)};
}

// The Phi minimiser under the configured budget with every upload within `deadline` seconds
// (0 = no deadline), solved in the pricing units of unitPlan: ratios of the full model's units,
// integer unit counts that keep the budget, caps = what those units hold (at most d).
Allocation solveAll(const std::vector<WorkerLoad>& workers, uint32_t dim, const Budget& budget,
                    const LinkCosts& links, double deadline) {
  const std::size_t n = workers.size();
  const bool seconds = links.known && budget.seconds_per_round > 0.0;
  KeyFactorProblem problem;
  problem.shares = normalisedShares(workers);
  const UnitPlan plan = unitPlan(n, dim, budget, links, deadline, seconds);
  problem.upper.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    problem.upper[i] =
        std::min(1.0, static_cast<double>(plan.packing[i].coordinates(plan.upper[i])) / dim);
  }
  const UnitPrices prices = seconds ? priceSeconds(plan, dim, budget, links, problem)
                                    : priceVolume(workers, dim, budget, problem);
  Allocation out;
  out.ratios = minimiseKeyFactor(problem);
  std::vector<double> unit_ratios = out.ratios;  // the ratios as shares of each worker's units
  for (std::size_t i = 0; i < n; ++i) {
    unit_ratios[i] = std::min(1.0, plan.fractionalUnits(i, out.ratios[i], dim) / plan.units[i]);
  }
  out.caps = roundCaps(unit_ratios, plan.units, prices.cost_per_unit, prices.limit, plan.upper);
  if (std::any_of(plan.packing.begin(), plan.packing.end(),
                  [](const Packing& p) { return p.packet_bytes > 0.0; })) {
    refineUnits(problem.shares, dim, plan.packing, prices.cost_per_unit, prices.limit, plan.upper,
                out.caps);
    // Whole packets: each worker fills the packets it pays for, and its ratio is what it sends.
    for (std::size_t i = 0; i < n; ++i) {
      out.caps[i] = std::min(dim, plan.packing[i].coordinates(out.caps[i]));
      out.ratios[i] = static_cast<double>(out.caps[i]) / dim;
    }
  }
  out.phi = keyFactor(problem.shares, out.ratios);
  return out;
}

// solveAll, except that under a link-seconds budget a worker whose one pricing unit alone costs
// more than the whole budget (a stalled link) can be within no plan: it gets one unit, not
// charged, and the others are planned among themselves, rather than all being cut to one unit
// for nothing.
Allocation solve(const std::vector<WorkerLoad>& workers, uint32_t dim, const Budget& budget,
                 const LinkCosts& links, double deadline) {
  if (!(links.known && budget.seconds_per_round > 0.0)) {
    return solveAll(workers, dim, budget, links, deadline);
  }
  const std::size_t n = workers.size();
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < n; ++i) {
    if (links.per_unit[i] <= budget.seconds_per_round) kept.push_back(i);
  }
  if (kept.size() == n) return solveAll(workers, dim, budget, links, deadline);
  Allocation out;
  out.caps.resize(n);
  out.ratios.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.caps[i] = std::min(dim, links.packing[i].coordinates(1));
    out.ratios[i] = static_cast<double>(out.caps[i]) / dim;
  }
  if (!kept.empty()) {
    std::vector<WorkerLoad> sub_workers;
    LinkCosts sub = links;
    sub.per_coordinate.clear();
    sub.fixed.clear();
    sub.per_unit.clear();
    sub.packing.clear();
    for (std::size_t i : kept) {
      sub.packing.push_back(links.packing[i]);
      sub_workers.push_back(workers[i]);
      sub.per_coordinate.push_back(links.per_coordinate[i]);
      sub.fixed.push_back(links.fixed[i]);
      sub.per_unit.push_back(links.per_unit[i]);
    }
    const Allocation part = solveAll(sub_workers, dim, budget, sub, deadline);
    for (std::size_t k = 0; k < kept.size(); ++k) {
      out.caps[kept[k]] = part.caps[k];
      out.ratios[kept[k]] = part.ratios[k];
    }
  }
  out.phi = keyFactor(normalisedShares(workers), out.ratios);
  return out;
}

// The slowest upload of the plan on the fitted links: what the round waits for.
double slowestUpload(const LinkCosts& links, const std::vector<uint32_t>& caps) {
  double slowest = 0.0;
  for (std::size_t i = 0; i < caps.size(); ++i) {
    slowest = std::max(slowest, links.uploadSeconds(i, caps[i]));
  }
  return slowest;
}

// Phi times the modelled round time: the quantity the deadline search minimises. Phi bounds the
// rounds needed (docs/dagc.md, method: the key factor); the round lasts overhead + the slowest
// upload.
double roundCost(const Allocation& a, const LinkCosts& links, double overhead) {
  return a.phi * (overhead + slowestUpload(links, a.caps));
}

// The plans the deadline search weighs: the plan under a deadline of lo * exp(x) for a log-offset
// x, and its round cost.
struct DeadlineSearch {
  const std::vector<WorkerLoad>& workers;
  uint32_t dim;
  const Budget& budget;
  const LinkCosts& links;
  double lo;
  double overhead;

  Allocation at(double x) const { return solve(workers, dim, budget, links, lo * std::exp(x)); }
  double cost(const Allocation& a) const { return roundCost(a, links, overhead); }
};

// Golden-section search of the round cost over log-offsets [a, b]; keeps in best / best_cost
// whatever it sees that beats them.
void goldenSection(const DeadlineSearch& s, double a, double b, Allocation& best,
                   double& best_cost) {
  constexpr double kInvGolden = 0.6180339887498949;
  double x1 = b - kInvGolden * (b - a);
  double x2 = a + kInvGolden * (b - a);
  Allocation a1 = s.at(x1);
  Allocation a2 = s.at(x2);
  double f1 = s.cost(a1);
  double f2 = s.cost(a2);
  for (int iter = 0; iter < 40; ++iter) {
    if (f1 <= f2) {
      if (f1 < best_cost) {
        best_cost = f1;
        best = a1;
      }
      b = x2;
      x2 = x1;
      a2 = std::move(a1);
      f2 = f1;
      x1 = b - kInvGolden * (b - a);
      a1 = s.at(x1);
      f1 = s.cost(a1);
    } else {
      if (f2 < best_cost) {
        best_cost = f2;
        best = a2;
      }
      a = x1;
      x1 = x2;
      a1 = std::move(a2);
      f1 = f2;
      x2 = a + kInvGolden * (b - a);
      a2 = s.at(x2);
      f2 = s.cost(a2);
    }
  }
  if (f1 < best_cost) {
    best_cost = f1;
    best = std::move(a1);
  }
  if (f2 < best_cost) {
    best_cost = f2;
    best = std::move(a2);
  }
}

// Chooses the deadline: a log-spaced scan from "everyone sends one coordinate" up to the
// slowest upload of the unconstrained plan (above it the deadline binds no one), then a
// golden-section refinement between the neighbours of the best grid point. The cost is not
// unimodal in general (caps move in integer steps, workers hit the deadline one by one), hence
// the scan first; the unconstrained plan itself is always a candidate.
Allocation chooseDeadline(const std::vector<WorkerLoad>& workers, uint32_t dim,
                          const Budget& budget, const LinkCosts& links) {
  const double overhead = budget.round_overhead_seconds;
  Allocation best = solve(workers, dim, budget, links, 0.0);
  double best_cost = roundCost(best, links, overhead);
  const double hi = slowestUpload(links, best.caps);
  double lo = 0.0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    lo = std::max(lo, links.fixed[i] + links.per_unit[i]);
  }
  if (!(hi > lo) || !(lo > 0.0)) return best;

  const DeadlineSearch search{workers, dim, budget, links, lo, overhead};
  constexpr int kGrid = 96;
  const double step = std::log(hi / lo) / kGrid;
  int best_index = kGrid;  // the unconstrained plan sits at the top of the grid
  for (int j = 0; j < kGrid; ++j) {
    Allocation a = search.at(step * j);
    const double cost = search.cost(a);
    if (cost < best_cost) {
      best_cost = cost;
      best = std::move(a);
      best_index = j;
    }
  }
  goldenSection(search, step * std::max(0, best_index - 1), step * std::min(kGrid, best_index + 1),
                best, best_cost);
  return best;
}

}  // namespace

Allocation CostAwareAllocator::allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                                        const Budget& budget) const {
  if (workers.empty()) return {};
  if (dim == 0) throw std::invalid_argument("allocation: model dimension must be positive");
  const LinkCosts links = linkCosts(workers, budget);
  if (budget.deadline_seconds > 0.0 || !links.known || !(budget.round_overhead_seconds > 0.0)) {
    return solve(workers, dim, budget, links, budget.deadline_seconds);
  }
  return chooseDeadline(workers, dim, budget, links);
}

}  // namespace tern::allocation
