#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "common/allocation/allocators.hpp"
#include "common/allocation/budget.hpp"
#include "common/allocation/key_factor_minimiser.hpp"
#include "common/allocation/link_costs.hpp"

namespace tern::allocation {

namespace {

// Integer refinement of packet counts after rounding. With few packets per worker the rounded
// relaxation can be far from the best integer plan (one packet is a large step), so single-packet
// moves are tried until none lowers Phi: giving a worker one more packet when the budget still
// has room for it, or moving one packet from worker j to worker i when the freed seconds pay for
// it, and the uneven trades (one dear packet for several cheap ones and back); with a dozen
// workers or fewer also one packet to i paid with one of j's and as few of a third worker's as
// the rest takes. Each step takes the move that lowers Phi most; Phi of a move is updated in
// O(1) from the sum of p_i / sqrt(delta_i) and the four smallest ratios.
void refineUnits(const std::vector<double>& shares, uint32_t dim,
                 const std::vector<Packing>& packing, const std::vector<double>& cost, double limit,
                 const std::vector<uint32_t>& upper, std::vector<uint32_t>& counts) {
  const std::size_t n = counts.size();
  // A step looks at every pair of workers; past a few hundred workers the plan keeps the rounded
  // relaxation as it is.
  if (n == 0 || n > 256) return;
  const bool three_way = n <= 12;
  const double allowed = limit * (1.0 + 1e-12);
  // The ratio of worker i holding m of its units.
  auto ratio = [&](std::size_t i, int64_t m) {
    return static_cast<double>(std::min(dim, packing[i].coordinates(uint64_t(m)))) / dim;
  };
  auto term = [&](std::size_t i, int64_t m) { return shares[i] / std::sqrt(ratio(i, m)); };
  const std::size_t max_steps = 16 * n + 256;
  for (std::size_t step = 0; step < max_steps; ++step) {
    double spent = 0.0;
    double sum = 0.0;
    std::array<std::size_t, 4> low{n, n, n, n};  // indices of the four smallest ratios
    for (std::size_t i = 0; i < n; ++i) {
      spent += cost[i] * counts[i];
      sum += term(i, counts[i]);
      for (std::size_t slot = 0; slot < low.size(); ++slot) {
        if (low[slot] == n || ratio(i, counts[i]) < ratio(low[slot], counts[low[slot]])) {
          for (std::size_t k = low.size() - 1; k > slot; --k) low[k] = low[k - 1];
          low[slot] = i;
          break;
        }
      }
    }
    // The smallest ratio of the workers a move leaves alone.
    auto minExcept = [&](std::size_t a, std::size_t b, std::size_t c) {
      for (std::size_t idx : low) {
        if (idx != n && idx != a && idx != b && idx != c) return ratio(idx, counts[idx]);
      }
      return 1.0;  // no other worker: no constraint from them
    };
    const double phi = sum / std::sqrt(ratio(low[0], counts[low[0]]));
    double best_phi = phi * (1.0 - 1e-12);
    // The best move: `many` packets to best_to, `taken` from best_from and `taken2` from
    // best_from2 (n = no one).
    std::size_t best_to = n;
    std::size_t best_from = n;
    std::size_t best_from2 = n;
    uint32_t best_many = 0;
    uint32_t best_taken = 0;
    uint32_t best_taken2 = 0;
    auto consider = [&](std::size_t to, uint32_t many, std::size_t from, uint32_t taken,
                        std::size_t from2 = SIZE_MAX, uint32_t taken2 = 0) {
      if (from2 == SIZE_MAX) from2 = n;
      double moved = sum + term(to, counts[to] + many) - term(to, counts[to]);
      double lowest = std::min(minExcept(to, from, from2), ratio(to, counts[to] + many));
      if (from != n) {
        moved += term(from, counts[from] - taken) - term(from, counts[from]);
        lowest = std::min(lowest, ratio(from, counts[from] - taken));
      }
      if (from2 != n) {
        moved += term(from2, counts[from2] - taken2) - term(from2, counts[from2]);
        lowest = std::min(lowest, ratio(from2, counts[from2] - taken2));
      }
      const double value = moved / std::sqrt(lowest);
      if (value < best_phi) {
        best_phi = value;
        best_to = to;
        best_from = from;
        best_from2 = from2;
        best_many = many;
        best_taken = taken;
        best_taken2 = taken2;
      }
    };
    for (std::size_t i = 0; i < n; ++i) {
      if (counts[i] >= upper[i]) continue;
      if (spent + cost[i] <= allowed) consider(i, 1, n, 0);  // one more packet for i
      for (std::size_t j = 0; j < n; ++j) {
        if (j == i || counts[j] <= 1) continue;
        // One packet from j to i.
        if (spent - cost[j] + cost[i] <= allowed) consider(i, 1, j, 1);
        // One packet from j, and as many as the freed seconds buy to i.
        const double fit = std::floor((allowed - spent + cost[j]) / cost[i]);
        const double many = std::min<double>(fit, static_cast<double>(upper[i]) - counts[i]);
        if (many >= 2.0) consider(i, static_cast<uint32_t>(many), j, 1);
        // One packet to i, paid for with as few of j's as it takes.
        const double need = spent + cost[i] - allowed;
        if (need > 0.0) {
          const double take = std::ceil(need / cost[j] * (1.0 - 1e-12));
          if (take >= 2.0 && take < counts[j]) consider(i, 1, j, static_cast<uint32_t>(take));
        }
        // One packet to i, paid for with one of j's and as few of a third worker's as the rest
        // takes.
        const double rest = need - cost[j];
        if (!three_way || !(rest > 0.0)) continue;
        for (std::size_t k = 0; k < n; ++k) {
          if (k == i || k == j || counts[k] <= 1) continue;
          const double take = std::ceil(rest / cost[k] * (1.0 - 1e-12));
          if (take >= 1.0 && take < counts[k]) {
            consider(i, 1, j, 1, k, static_cast<uint32_t>(take));
          }
        }
      }
    }
    if (best_to == n) return;
    counts[best_to] += best_many;
    if (best_from != n) counts[best_from] -= best_taken;
    if (best_from2 != n) counts[best_from2] -= best_taken2;
  }
}

// The Phi minimiser under the configured budget with every upload within `deadline` seconds
// (0 = no deadline). Under a link-seconds budget the problem is solved in the links' pricing
// units (coordinates, or each worker's whole packets with Budget::whole_packets): ratios of the
// full model's units, integer unit counts that keep the budget, caps = what those units hold
// (at most d).
Allocation solveAll(const std::vector<WorkerLoad>& workers, uint32_t dim, const Budget& budget,
                    const LinkCosts& links, double deadline) {
  const std::size_t n = workers.size();
  const bool seconds = links.known && budget.seconds_per_round > 0.0;
  std::vector<Packing> packing(n);
  if (seconds) packing = links.packing;
  std::vector<uint32_t> units(n);  // the full model in worker i's units
  for (std::size_t i = 0; i < n; ++i) {
    units[i] = static_cast<uint32_t>(packing[i].unitsFor(dim));
  }
  KeyFactorProblem problem;
  problem.shares = normalisedShares(workers);
  std::vector<uint32_t> upper = units;
  if (links.known && deadline > 0.0) {
    Budget bounded = budget;
    bounded.deadline_seconds = deadline;
    for (std::size_t i = 0; i < n; ++i) {
      upper[i] = deadlineUnits(links, i, units[i], bounded);
    }
  }
  // Whole packets: m packets hold about (m P - push) / c coordinates, so ratio r of the model
  // takes (r d c + push) / P packets, affine in r. The relaxation prices that exactly (the
  // pushes' fixed bytes come off the budget first) and rounds in fractional packets; priced by
  // the coordinate, a ratio r is r d units.
  auto fractionalUnits = [&](std::size_t i, double r) {
    const Packing& pk = packing[i];
    if (!(pk.packet_bytes > 0.0)) return r * units[i];
    return (r * dim * pk.coordinate_bytes + pk.push_bytes) / pk.packet_bytes;
  };
  problem.upper.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    problem.upper[i] = std::min(1.0, static_cast<double>(packing[i].coordinates(upper[i])) / dim);
  }

  std::vector<double> cost_per_unit;
  double limit = 0.0;
  if (seconds) {
    // sum_i c_i * delta_i * units_i <= seconds: the Lagrangian puts delta_i ~ (p_i / w_i)^(2/3)
    // with w_i = c_i * units_i, the seconds of worker i's whole model.
    problem.weights.resize(n);
    double fixed_seconds = 0.0;  // what the pushes' fixed bytes take of whole packets
    for (std::size_t i = 0; i < n; ++i) {
      problem.weights[i] = links.per_unit[i] * (fractionalUnits(i, 1.0) - fractionalUnits(i, 0.0));
      fixed_seconds += links.per_unit[i] * fractionalUnits(i, 0.0);
    }
    problem.budget =
        std::max(budget.seconds_per_round - fixed_seconds, 1e-9 * budget.seconds_per_round);
    cost_per_unit = links.per_unit;
    limit = budget.seconds_per_round;
  } else {
    // A volume budget prices a worker's coordinates at its bytes per coordinate; the links then
    // matter only through the deadline caps, and without a deadline this is dagc-opt.
    const VolumeBudget volume = volumeBudget(workers, dim, budget);
    problem.weights = volume.weights;
    problem.budget = volume.total;
    cost_per_unit = volume.weights;
    limit = volume.coordinateLimit(dim);
  }
  Allocation out;
  out.ratios = minimiseKeyFactor(problem);
  std::vector<double> unit_ratios = out.ratios;  // the ratios as shares of each worker's units
  for (std::size_t i = 0; i < n; ++i) {
    unit_ratios[i] = std::min(1.0, fractionalUnits(i, out.ratios[i]) / units[i]);
  }
  out.caps = roundCaps(unit_ratios, units, cost_per_unit, limit, upper);
  if (std::any_of(packing.begin(), packing.end(),
                  [](const Packing& p) { return p.packet_bytes > 0.0; })) {
    refineUnits(problem.shares, dim, packing, cost_per_unit, limit, upper, out.caps);
    // Whole packets: each worker fills the packets it pays for, and its ratio is what it sends.
    for (std::size_t i = 0; i < n; ++i) {
      out.caps[i] = std::min(dim, packing[i].coordinates(out.caps[i]));
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
// rounds needed (papers/dagc.md, key factor); the round lasts overhead + the slowest upload.
double roundCost(const Allocation& a, const LinkCosts& links, double overhead) {
  return a.phi * (overhead + slowestUpload(links, a.caps));
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

  constexpr int kGrid = 96;
  const double step = std::log(hi / lo) / kGrid;
  int best_index = kGrid;  // the unconstrained plan sits at the top of the grid
  for (int j = 0; j < kGrid; ++j) {
    const double deadline = lo * std::exp(step * j);
    Allocation a = solve(workers, dim, budget, links, deadline);
    const double cost = roundCost(a, links, overhead);
    if (cost < best_cost) {
      best_cost = cost;
      best = std::move(a);
      best_index = j;
    }
  }
  constexpr double kInvGolden = 0.6180339887498949;
  double a = step * std::max(0, best_index - 1);
  double b = step * std::min(kGrid, best_index + 1);
  auto at = [&](double x) { return solve(workers, dim, budget, links, lo * std::exp(x)); };
  double x1 = b - kInvGolden * (b - a);
  double x2 = a + kInvGolden * (b - a);
  Allocation a1 = at(x1);
  Allocation a2 = at(x2);
  double f1 = roundCost(a1, links, overhead);
  double f2 = roundCost(a2, links, overhead);
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
      a1 = at(x1);
      f1 = roundCost(a1, links, overhead);
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
      a2 = at(x2);
      f2 = roundCost(a2, links, overhead);
    }
  }
  if (f1 < best_cost) {
    best_cost = f1;
    best = std::move(a1);
  }
  if (f2 < best_cost) best = std::move(a2);
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
