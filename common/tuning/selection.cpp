#include "common/tuning/selection.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <vector>

namespace tern::tuning {
namespace {

// Bounds are computed from the same prefix sums as the ratios they bound; the margin only
// absorbs rounding in omega (mathematically monotone, computed through a division).
constexpr double kBoundMargin = 1.0 + 1e-9;
// Block length when the cost model has no packets to follow.
constexpr uint32_t kBlock = 64;

// What a search maximises: improvement / cost over the levels that earn a decrease, or the
// improvement itself when none does.
enum class Goal { kRatio, kLeastHarm };

struct Candidate {
  uint32_t level = 0;
  double key = -std::numeric_limits<double>::infinity();  // what is maximised
  double improvement = 0.0;
  double cost = 0.0;
  // Higher key wins, then the smaller level.
  bool beats(double k, uint32_t t) const { return k > key || (k == key && t < level); }
};

class Evaluator {
 public:
  Evaluator(Scheme scheme, MagnitudeProfile& p, double L, double eta,
            const compression::Compressor& comp, const costmodel::CostModel& cost,
            double credit_limit, double base)
      : scheme_(scheme),
        p_(p),
        L_(L),
        eta_(eta),
        credit_limit_(credit_limit),
        base_(base),
        comp_(comp),
        cost_(cost),
        dim_(static_cast<uint32_t>(p.dim())) {}

  double costAt(uint32_t T) const { return cost_.cost(comp_.encodedBytes(dim_, T)); }

  // Evaluates T for both goals: the best ratio among the levels that earn a decrease, and the
  // largest (credited) improvement, for when none does.
  void consider(uint32_t T) {
    ++evaluations_;
    // The order is grown geometrically so that a search reaching far only sorts O(log) times.
    if (needsOrder(scheme_) && T > p_.sortedCount())
      p_.sortAtLeast(std::max<size_t>(T, 2 * p_.sortedCount()));
    const double imp = std::min(base_ + improvement(scheme_, p_, T, L_, eta_), credit_limit_);
    const double c = costAt(T);
    if (imp > 0.0 && earning_.beats(imp / c, T)) earning_ = {T, imp / c, imp, c};
    if (least_harm_.beats(imp, T)) least_harm_ = {T, imp, imp, c};
  }

  // An upper bound on the credited improvement over [lo, hi]. Adding a constant and min with a
  // constant keep an upper bound an upper bound.
  double gainBound(uint32_t lo, uint32_t hi) const {
    return std::min(base_ + improvementUpperBound(scheme_, p_, lo, hi, L_, eta_), credit_limit_);
  }

  const Candidate& best(Goal goal) const { return goal == Goal::kRatio ? earning_ : least_harm_; }
  size_t evaluations() const { return evaluations_; }

 private:
  Scheme scheme_;
  MagnitudeProfile& p_;
  double L_;
  double eta_;
  double credit_limit_;
  double base_;
  const compression::Compressor& comp_;
  const costmodel::CostModel& cost_;
  uint32_t dim_;
  Candidate earning_, least_harm_;
  size_t evaluations_ = 0;
};

void checkArguments(const MagnitudeProfile& p, double L, uint32_t max_level, double credit_limit,
                    double base, double eta) {
  if (max_level < 1 || max_level > p.dim())
    throw std::invalid_argument("selectLevel: max_level must be in [1, dim]");
  if (!(L > 0.0)) throw std::invalid_argument("selectLevel: smoothness must be > 0");
  if (!(credit_limit >= 0.0)) throw std::invalid_argument("selectLevel: credit limit must be >= 0");
  if (!(base >= 0.0) || !std::isfinite(base))
    throw std::invalid_argument("selectLevel: base improvement must be finite and >= 0");
  if (!(eta >= 0.0) || !std::isfinite(eta))
    throw std::invalid_argument("selectLevel: step must be finite and >= 0 (0 = the best step)");
  // The overshoot L eta^2 E||Q||^2 / 2 with E||Q||^2 <= d ||v||^2 (random-T at T = 1) must be a
  // number, or every level's bound is -inf and no level can be told from another.
  if (eta > 0.0 && !std::isfinite(L * eta * eta * double(p.dim()) * p.totalL2sq()))
    throw std::invalid_argument("selectLevel: step and smoothness overflow the improvement");
}

struct Block {
  uint32_t lo, hi;
  double gain;   // gainBound(lo, hi)
  double bound;  // on the goal's key over the block
};

// The bound on a block's key: for the ratio, its gain over the block's smallest cost (only a
// block that may earn a decrease can hold a level with a positive ratio: the others get -inf);
// for the least harm, its gain. Both with a margin for rounding in omega.
double keyBound(Goal goal, const Block& b, const Evaluator& ev) {
  if (goal == Goal::kLeastHarm) return b.gain + std::fabs(b.gain) * (kBoundMargin - 1.0);
  if (!(b.gain > 0.0)) return -std::numeric_limits<double>::infinity();
  return b.gain / ev.costAt(b.lo) * kBoundMargin;
}

// Blocks over [1, m - 1]: whole packets when the model has them (cost is flat inside, so the
// bound is tight), else runs of kBlock levels; packets shorter than a block would only
// multiply the bounds to compute, so they get fixed runs too. T = m is a block of its own
// because at T = d the codec drops the index section, so the size may fall there and no bound
// from below holds.
std::vector<Block> makeBlocks(Evaluator& ev, uint32_t m, const compression::Compressor& comp,
                              uint32_t dim, const costmodel::CostModel& cost) {
  std::vector<Block> blocks;
  const uint32_t last = m - 1;
  const auto steps = last >= 1 ? packetSteps(comp, dim, last, cost.packetBytes().value_or(0),
                                             kBlock, cost.overheadBytes())
                               : std::nullopt;
  if (steps) {
    uint32_t lo = 1;
    for (uint32_t s : *steps) {
      blocks.push_back({lo, s, 0.0, 0.0});
      lo = s + 1;
    }
    blocks.push_back({lo, last, 0.0, 0.0});
  } else {
    for (uint32_t lo = 1; lo <= last; lo += kBlock) {
      const uint32_t hi =
          static_cast<uint32_t>(std::min<uint64_t>(uint64_t{lo} + kBlock - 1, last));
      blocks.push_back({lo, hi, 0.0, 0.0});
    }
  }
  blocks.push_back({m, m, 0.0, 0.0});
  for (Block& b : blocks) b.gain = ev.gainBound(b.lo, b.hi);
  return blocks;
}

// Best bound first; a long block (a packet holding many levels) is split into runs of kBlock
// with their own, tighter bounds before anything in it is evaluated. Once the best bound left
// is below the best key found, nothing left can win. Returns the bounds computed.
size_t branchAndBound(Goal goal, const std::vector<Block>& all, Evaluator& ev) {
  constexpr double kNever = -std::numeric_limits<double>::infinity();
  size_t bounds = 0;
  std::vector<Block> blocks;
  for (Block b : all) {
    b.bound = keyBound(goal, b, ev);
    if (b.bound != kNever) blocks.push_back(b);
  }
  auto later = [](const Block& a, const Block& b) {
    return a.bound < b.bound || (a.bound == b.bound && a.lo > b.lo);
  };
  std::priority_queue<Block, std::vector<Block>, decltype(later)> queue(later, std::move(blocks));
  while (!queue.empty()) {
    const Block b = queue.top();
    queue.pop();
    const Candidate& best = ev.best(goal);
    if (best.level != 0 && b.bound < best.key) break;
    if (best.level != 0 && b.bound == best.key && b.lo > best.level) continue;
    if (b.hi - b.lo >= kBlock) {
      for (uint64_t lo = b.lo; lo <= b.hi; lo += kBlock) {
        const auto hi = static_cast<uint32_t>(std::min<uint64_t>(lo + kBlock - 1, b.hi));
        Block part{static_cast<uint32_t>(lo), hi, ev.gainBound(static_cast<uint32_t>(lo), hi), 0.0};
        part.bound = keyBound(goal, part, ev);
        ++bounds;
        if (part.bound != kNever) queue.push(part);
      }
      continue;
    }
    for (uint32_t T = b.lo; T <= b.hi; ++T) ev.consider(T);
  }
  return bounds;
}

// The level that earns the best ratio, or, when none earns a decrease, the least harm. A
// non-finite vector leaves every improvement NaN; fall back to one coordinate rather than none.
Selection finish(const Evaluator& ev, size_t evaluations) {
  const Candidate& earning = ev.best(Goal::kRatio);
  if (earning.level != 0)
    return {earning.level, earning.improvement, earning.cost, earning.key, evaluations};
  const Candidate& harm = ev.best(Goal::kLeastHarm);
  if (harm.level == 0) return {1, 0.0, 0.0, 0.0, evaluations};
  return {harm.level, harm.improvement, harm.cost, harm.improvement / harm.cost, evaluations};
}

}  // namespace

Selection selectLevel(Scheme scheme, MagnitudeProfile& p, double L, uint32_t max_level,
                      const compression::Compressor& comp, const costmodel::CostModel& cost,
                      double credit_limit, double base_improvement, double eta) {
  checkArguments(p, L, max_level, credit_limit, base_improvement, eta);
  Evaluator ev(scheme, p, L, eta, comp, cost, credit_limit, base_improvement);
  const std::vector<Block> blocks =
      makeBlocks(ev, max_level, comp, static_cast<uint32_t>(p.dim()), cost);
  size_t bounds = blocks.size() + branchAndBound(Goal::kRatio, blocks, ev);
  // No level earns a decrease (a step past 2/L, or noise outweighing the gain everywhere): a
  // ratio of negative numbers would favour the costliest harm, so the least harm wins instead.
  if (ev.best(Goal::kRatio).level == 0) bounds += branchAndBound(Goal::kLeastHarm, blocks, ev);
  return finish(ev, ev.evaluations() + bounds);
}

std::optional<std::vector<uint32_t>> packetSteps(const compression::Compressor& comp, uint32_t dim,
                                                 uint32_t last, size_t packet_bytes,
                                                 double min_levels_per_packet,
                                                 size_t overhead_bytes) {
  if (packet_bytes == 0) return std::nullopt;
  std::vector<uint32_t> steps;
  if (last < 2) return steps;
  auto bytesAt = [&](uint32_t T) { return comp.encodedBytes(dim, T); };
  const double bytes_per_level =
      (static_cast<double>(bytesAt(last)) - static_cast<double>(bytesAt(1))) /
      static_cast<double>(last - 1);
  if (static_cast<double>(packet_bytes) < min_levels_per_packet * bytes_per_level)
    return std::nullopt;
  auto packetsAt = [&](uint32_t T) {
    return (bytesAt(T) + overhead_bytes + packet_bytes - 1) / packet_bytes;
  };
  const size_t packets_at_last = packetsAt(last);
  for (uint32_t lo = 1; lo < last;) {
    const size_t packets = packetsAt(lo);
    if (packets == packets_at_last) break;
    // Last level with the same packet count: gallop, then bisect.
    uint32_t good = lo, bad = last;
    uint64_t step = 1;
    while (true) {
      const uint64_t probe = good + step;
      if (probe >= last) break;
      if (packetsAt(static_cast<uint32_t>(probe)) == packets) {
        good = static_cast<uint32_t>(probe);
        step *= 2;
      } else {
        bad = static_cast<uint32_t>(probe);
        break;
      }
    }
    while (bad - good > 1) {
      const uint32_t mid = good + (bad - good) / 2;
      (packetsAt(mid) == packets ? good : bad) = mid;
    }
    steps.push_back(good);
    lo = good + 1;
  }
  return steps;
}

Selection selectLevelBruteForce(Scheme scheme, MagnitudeProfile& p, double L, uint32_t max_level,
                                const compression::Compressor& comp,
                                const costmodel::CostModel& cost, double credit_limit,
                                double base_improvement, double eta) {
  checkArguments(p, L, max_level, credit_limit, base_improvement, eta);
  p.sortAtLeast(max_level);
  Evaluator ev(scheme, p, L, eta, comp, cost, credit_limit, base_improvement);
  for (uint32_t T = 1; T <= max_level; ++T) ev.consider(T);
  return finish(ev, ev.evaluations());
}

}  // namespace tern::tuning
