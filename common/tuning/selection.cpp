#include "common/tuning/selection.hpp"

#include <algorithm>
#include <cmath>
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

struct Candidate {
  uint32_t level = 0;
  double ratio = -1.0;
  double improvement = 0.0;
  double cost = 0.0;
  // Higher ratio wins, then the smaller level.
  bool beats(double r, uint32_t t) const { return r > ratio || (r == ratio && t < level); }
};

class Evaluator {
 public:
  Evaluator(Scheme scheme, MagnitudeProfile& p, double L, const compression::Compressor& comp,
            const costmodel::CostModel& cost, double credit_limit, double base)
      : scheme_(scheme),
        p_(p),
        L_(L),
        credit_limit_(credit_limit),
        base_(base),
        comp_(comp),
        cost_(cost),
        dim_(static_cast<uint32_t>(p.dim())) {}

  double costAt(uint32_t T) const { return cost_.cost(comp_.encodedBytes(dim_, T)); }

  void consider(uint32_t T, Candidate& best) {
    ++evaluations_;
    // The order is grown geometrically so that a search reaching far only sorts O(log) times.
    if (needsOrder(scheme_) && T > p_.sortedCount())
      p_.sortAtLeast(std::max<size_t>(T, 2 * p_.sortedCount()));
    const double imp = std::min(base_ + improvement(scheme_, p_, T, L_), credit_limit_);
    const double c = costAt(T);
    const double r = imp / c;
    if (best.beats(r, T)) best = {T, r, imp, c};
  }

  double bound(uint32_t lo, uint32_t hi) const {
    // Adding a constant and min with a constant keep an upper bound an upper bound (the base is
    // >= 0, so the bound stays >= 0 and dividing by the block's smallest cost keeps it one).
    return std::min(base_ + improvementUpperBound(scheme_, p_, lo, hi, L_), credit_limit_) /
           costAt(lo) * kBoundMargin;
  }

  size_t evaluations() const { return evaluations_; }

 private:
  Scheme scheme_;
  MagnitudeProfile& p_;
  double L_;
  double credit_limit_;
  double base_;
  const compression::Compressor& comp_;
  const costmodel::CostModel& cost_;
  uint32_t dim_;
  size_t evaluations_ = 0;
};

void checkArguments(const MagnitudeProfile& p, double L, uint32_t max_level, double credit_limit,
                    double base) {
  if (max_level < 1 || max_level > p.dim())
    throw std::invalid_argument("selectLevel: max_level must be in [1, dim]");
  if (!(L > 0.0)) throw std::invalid_argument("selectLevel: smoothness must be > 0");
  if (!(credit_limit >= 0.0)) throw std::invalid_argument("selectLevel: credit limit must be >= 0");
  if (!(base >= 0.0) || !std::isfinite(base))
    throw std::invalid_argument("selectLevel: base improvement must be finite and >= 0");
}

struct Block {
  uint32_t lo, hi;
  double bound;
};

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
      blocks.push_back({lo, s, 0.0});
      lo = s + 1;
    }
    blocks.push_back({lo, last, 0.0});
  } else {
    for (uint32_t lo = 1; lo <= last; lo += kBlock) {
      const uint32_t hi =
          static_cast<uint32_t>(std::min<uint64_t>(uint64_t{lo} + kBlock - 1, last));
      blocks.push_back({lo, hi, 0.0});
    }
  }
  blocks.push_back({m, m, 0.0});
  for (Block& b : blocks) b.bound = ev.bound(b.lo, b.hi);
  return blocks;
}

// A non-finite vector leaves every ratio NaN; fall back to one coordinate rather than none.
Selection finish(const Candidate& best, size_t evaluations) {
  if (best.level == 0) return {1, 0.0, 0.0, 0.0, evaluations};
  return {best.level, best.improvement, best.cost, best.ratio, evaluations};
}

}  // namespace

Selection selectLevel(Scheme scheme, MagnitudeProfile& p, double L, uint32_t max_level,
                      const compression::Compressor& comp, const costmodel::CostModel& cost,
                      double credit_limit, double base_improvement) {
  checkArguments(p, L, max_level, credit_limit, base_improvement);
  Evaluator ev(scheme, p, L, comp, cost, credit_limit, base_improvement);
  std::vector<Block> blocks = makeBlocks(ev, max_level, comp, static_cast<uint32_t>(p.dim()), cost);
  size_t bounds = blocks.size();
  // Best bound first; a long block (a packet holding many levels) is split into runs of kBlock
  // with their own, tighter bounds before anything in it is evaluated. Once the best bound left
  // is below the best ratio found, nothing left can win.
  auto later = [](const Block& a, const Block& b) {
    return a.bound < b.bound || (a.bound == b.bound && a.lo > b.lo);
  };
  std::priority_queue<Block, std::vector<Block>, decltype(later)> queue(later, std::move(blocks));
  Candidate best;
  while (!queue.empty()) {
    const Block b = queue.top();
    queue.pop();
    if (best.level != 0 && b.bound < best.ratio) break;
    if (best.level != 0 && b.bound == best.ratio && b.lo > best.level) continue;
    if (b.hi - b.lo >= kBlock) {
      for (uint64_t lo = b.lo; lo <= b.hi; lo += kBlock) {
        const auto hi = static_cast<uint32_t>(std::min<uint64_t>(lo + kBlock - 1, b.hi));
        queue.push({static_cast<uint32_t>(lo), hi, ev.bound(static_cast<uint32_t>(lo), hi)});
        ++bounds;
      }
      continue;
    }
    for (uint32_t T = b.lo; T <= b.hi; ++T) ev.consider(T, best);
  }
  return finish(best, ev.evaluations() + bounds);
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
                                double base_improvement) {
  checkArguments(p, L, max_level, credit_limit, base_improvement);
  p.sortAtLeast(max_level);
  Evaluator ev(scheme, p, L, comp, cost, credit_limit, base_improvement);
  Candidate best;
  for (uint32_t T = 1; T <= max_level; ++T) ev.consider(T, best);
  return finish(best, ev.evaluations());
}

}  // namespace tern::tuning
