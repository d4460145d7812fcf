#include "common/allocation/unit_refinement.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace tern::allocation {

namespace {

// One candidate move: `many` units to `to`, `taken` from `from` and `taken2` from `from2` (n, the
// worker count, = no one).
struct Move {
  std::size_t to = 0;
  std::size_t from = 0;
  std::size_t from2 = 0;
  uint32_t many = 0;
  uint32_t taken = 0;
  uint32_t taken2 = 0;
};

// The refinement's state between steps: the counts it improves, and per step the units spent,
// sum_i p_i / sqrt(delta_i) and the four smallest ratios, from which the Phi of any move follows
// in O(1).
class UnitRefiner {
 public:
  UnitRefiner(const std::vector<double>& shares, uint32_t dim, const std::vector<Packing>& packing,
              const std::vector<double>& cost, double limit, const std::vector<uint32_t>& upper,
              std::vector<uint32_t>& counts)
      : shares_(shares),
        dim_(dim),
        packing_(packing),
        cost_(cost),
        upper_(upper),
        counts_(counts),
        n_(counts.size()),
        three_way_(n_ <= 12),
        allowed_(limit * (1.0 + 1e-12)) {}

  // Applies the move that lowers Phi most; false when none does.
  bool step() {
    measure();
    const double phi = sum_ / std::sqrt(ratio(low_[0], counts_[low_[0]]));
    best_phi_ = phi * (1.0 - 1e-12);
    best_ = Move{.to = n_, .from = n_, .from2 = n_};
    for (std::size_t i = 0; i < n_; ++i) {
      if (counts_[i] < upper_[i]) considerMovesTo(i);
    }
    if (best_.to == n_) return false;
    counts_[best_.to] += best_.many;
    if (best_.from != n_) counts_[best_.from] -= best_.taken;
    if (best_.from2 != n_) counts_[best_.from2] -= best_.taken2;
    return true;
  }

 private:
  // The ratio of worker i holding m of its units.
  double ratio(std::size_t i, int64_t m) const {
    return static_cast<double>(std::min(dim_, packing_[i].coordinates(uint64_t(m)))) / dim_;
  }
  double term(std::size_t i, int64_t m) const { return shares_[i] / std::sqrt(ratio(i, m)); }

  void measure() {
    spent_ = 0.0;
    sum_ = 0.0;
    low_ = {n_, n_, n_, n_};
    for (std::size_t i = 0; i < n_; ++i) {
      spent_ += cost_[i] * counts_[i];
      sum_ += term(i, counts_[i]);
      for (std::size_t slot = 0; slot < low_.size(); ++slot) {
        if (low_[slot] == n_ || ratio(i, counts_[i]) < ratio(low_[slot], counts_[low_[slot]])) {
          for (std::size_t k = low_.size() - 1; k > slot; --k) low_[k] = low_[k - 1];
          low_[slot] = i;
          break;
        }
      }
    }
  }

  // The smallest ratio of the workers a move leaves alone.
  double minExcept(std::size_t a, std::size_t b, std::size_t c) const {
    for (std::size_t idx : low_) {
      if (idx != n_ && idx != a && idx != b && idx != c) return ratio(idx, counts_[idx]);
    }
    return 1.0;  // no other worker: no constraint from them
  }

  void consider(const Move& m) {
    double moved = sum_ + term(m.to, counts_[m.to] + m.many) - term(m.to, counts_[m.to]);
    double lowest = std::min(minExcept(m.to, m.from, m.from2), ratio(m.to, counts_[m.to] + m.many));
    if (m.from != n_) {
      moved += term(m.from, counts_[m.from] - m.taken) - term(m.from, counts_[m.from]);
      lowest = std::min(lowest, ratio(m.from, counts_[m.from] - m.taken));
    }
    if (m.from2 != n_) {
      moved += term(m.from2, counts_[m.from2] - m.taken2) - term(m.from2, counts_[m.from2]);
      lowest = std::min(lowest, ratio(m.from2, counts_[m.from2] - m.taken2));
    }
    const double value = moved / std::sqrt(lowest);
    if (value < best_phi_) {
      best_phi_ = value;
      best_ = m;
    }
  }

  // The moves that give worker i (below its upper bound) more units.
  void considerMovesTo(std::size_t i) {
    if (spent_ + cost_[i] <= allowed_) consider({.to = i, .from = n_, .from2 = n_, .many = 1});
    for (std::size_t j = 0; j < n_; ++j) {
      if (j == i || counts_[j] <= 1) continue;
      considerTrades(i, j);
    }
  }

  // The moves of units from worker j (holding more than one) to worker i.
  void considerTrades(std::size_t i, std::size_t j) {
    // One unit from j to i.
    if (spent_ - cost_[j] + cost_[i] <= allowed_) {
      consider({.to = i, .from = j, .from2 = n_, .many = 1, .taken = 1});
    }
    // One unit from j, and as many as the freed seconds buy to i.
    const double fit = std::floor((allowed_ - spent_ + cost_[j]) / cost_[i]);
    const double many = std::min<double>(fit, static_cast<double>(upper_[i]) - counts_[i]);
    if (many >= 2.0) {
      consider({.to = i, .from = j, .from2 = n_, .many = static_cast<uint32_t>(many), .taken = 1});
    }
    // One unit to i, paid for with as few of j's as it takes.
    const double need = spent_ + cost_[i] - allowed_;
    if (need > 0.0) {
      const double take = std::ceil(need / cost_[j] * (1.0 - 1e-12));
      if (take >= 2.0 && take < counts_[j]) {
        consider({.to = i, .from = j, .from2 = n_, .many = 1, .taken = uint32_t(take)});
      }
    }
    // One unit to i, paid for with one of j's and as few of a third worker's as the rest takes.
    const double rest = need - cost_[j];
    if (three_way_ && rest > 0.0) considerThreeWay(i, j, rest);
  }

  void considerThreeWay(std::size_t i, std::size_t j, double rest) {
    for (std::size_t k = 0; k < n_; ++k) {
      if (k == i || k == j || counts_[k] <= 1) continue;
      const double take = std::ceil(rest / cost_[k] * (1.0 - 1e-12));
      if (take >= 1.0 && take < counts_[k]) {
        consider({.to = i, .from = j, .from2 = k, .many = 1, .taken = 1, .taken2 = uint32_t(take)});
      }
    }
  }

  const std::vector<double>& shares_;
  const uint32_t dim_;
  const std::vector<Packing>& packing_;
  const std::vector<double>& cost_;
  const std::vector<uint32_t>& upper_;
  std::vector<uint32_t>& counts_;
  const std::size_t n_;
  const bool three_way_;
  const double allowed_;
  double spent_ = 0.0;
  double sum_ = 0.0;
  std::array<std::size_t, 4> low_{};  // indices of the four smallest ratios
  double best_phi_ = 0.0;
  Move best_;
};

}  // namespace

void refineUnits(const std::vector<double>& shares, uint32_t dim,
                 const std::vector<Packing>& packing, const std::vector<double>& cost, double limit,
                 const std::vector<uint32_t>& upper, std::vector<uint32_t>& counts) {
  const std::size_t n = counts.size();
  // A step looks at every pair of workers; past a few hundred workers the plan keeps the rounded
  // relaxation as it is.
  if (n == 0 || n > 256) return;
  UnitRefiner refiner(shares, dim, packing, cost, limit, upper, counts);
  const std::size_t max_steps = 16 * n + 256;
  for (std::size_t step = 0; step < max_steps; ++step) {
    if (!refiner.step()) return;
  }
}

}  // namespace tern::allocation
