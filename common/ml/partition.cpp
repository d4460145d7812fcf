// Partitioning. Without label skew: a seeded shuffle cut into the geometric volume sizes.
// With it, sizes still come from the volume shares and each worker's class mix from its
// Dirichlet(alpha) draw. With both fixed, the class totals of the data may not match what the
// workers ask for; over-asked classes are shared in proportion to the requests and every worker
// then tops up from the classes it prefers most that still have rows, so all rows are used.
#include "common/ml/partition.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "common/ml/detail/random.hpp"
#include "common/util/checksum.hpp"
#include "common/util/rng.hpp"

namespace tern::ml {
namespace {

enum StreamTag : uint64_t { kIidShuffle = 1, kClassPools, kDirichlet };

// Largest-remainder rounding of total * w_i / sum(w): integers summing exactly to total.
// Ties go to the lower index so the result is deterministic.
std::vector<size_t> apportion(size_t total, std::span<const double> weights) {
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<size_t> out(weights.size(), 0);
  if (weights.empty() || sum <= 0) return out;
  std::vector<std::pair<double, size_t>> remainders;
  remainders.reserve(weights.size());
  size_t assigned = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double exact = double(total) * weights[i] / sum;
    out[i] = std::min(total, static_cast<size_t>(std::floor(exact)));
    assigned += out[i];
    remainders.emplace_back(exact - double(out[i]), i);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; assigned < total; k = (k + 1) % remainders.size()) {
    ++out[remainders[k].second];
    ++assigned;
  }
  // Rounding error in the quotients could in principle push the floors one past total.
  while (assigned > total) {
    --*std::max_element(out.begin(), out.end());
    --assigned;
  }
  return out;
}

std::vector<size_t> workerSizes(size_t rows, size_t parts, double ratio) {
  const auto shares = geometricShares(parts, ratio);
  auto sizes = apportion(rows, shares);
  // A tiny share may round to zero rows; every worker needs one, taken from the largest.
  for (auto& s : sizes) {
    if (s == 0) {
      ++s;
      --*std::max_element(sizes.begin(), sizes.end());
    }
  }
  return sizes;
}

// Dirichlet(alpha) as normalised Gamma(alpha, 1) draws. std::gamma_distribution's algorithm
// belongs to the standard library, so identical partitions need binaries built against the
// same one (true of every tern process in a deployment).
std::vector<double> dirichlet(size_t classes, double alpha, Rng& rng) {
  std::gamma_distribution<double> gamma(alpha, 1.0);
  std::vector<double> q(classes);
  double sum = 0;
  for (auto& v : q) sum += (v = gamma(rng));
  if (!(sum > 0) || !std::isfinite(sum)) {
    // Very small alpha can underflow every draw; the limit of Dirichlet(alpha -> 0) is a
    // single class, which is what we return.
    std::fill(q.begin(), q.end(), 0.0);
    q[detail::uniformIndex(rng, classes)] = 1.0;
    return q;
  }
  for (auto& v : q) v /= sum;
  return q;
}

}  // namespace

uint64_t partitionFingerprint(std::span<const int32_t> labels, int32_t classes, size_t parts,
                              const PartitionSpec& spec) {
  uint64_t h = kFnvOffset;
  auto mix = [&h](uint64_t word) { h = fnv1a(h, word, 8); };
  auto bitsOf = [](double x) {
    uint64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    return bits;
  };
  mix(labels.size());
  for (int32_t l : labels) mix(uint64_t(uint32_t(l)));
  mix(uint64_t(uint32_t(classes)));
  mix(parts);
  mix(bitsOf(spec.dirichlet_alpha));
  mix(bitsOf(spec.volume_ratio));
  mix(spec.seed);
  return h == 0 ? 1 : h;
}

std::vector<double> geometricShares(size_t parts, double ratio) {
  if (parts == 0) throw std::invalid_argument("geometricShares: parts must be >= 1");
  if (!std::isfinite(ratio) || ratio < 1.0) {
    throw std::invalid_argument("geometricShares: volume ratio must be finite and >= 1, got " +
                                std::to_string(ratio));
  }
  std::vector<double> shares(parts, 1.0);
  if (parts > 1) {
    // p_i proportional to ratio^(-i/(n-1)): log-spaced from p_0 down to p_0 / ratio.
    for (size_t i = 0; i < parts; ++i) {
      shares[i] = std::pow(ratio, -double(i) / double(parts - 1));
    }
  }
  const double sum = std::accumulate(shares.begin(), shares.end(), 0.0);
  for (auto& s : shares) s /= sum;
  return shares;
}

namespace {

using Parts = std::vector<std::vector<size_t>>;

// Without label skew: a seeded shuffle cut into the workers' sizes.
Parts iidPartition(size_t rows, const std::vector<size_t>& sizes, uint64_t seed) {
  std::vector<size_t> order(rows);
  std::iota(order.begin(), order.end(), size_t{0});
  Rng rng(deriveSeed(seed, kIidShuffle));
  detail::shuffle(order.begin(), order.end(), rng);
  Parts out(sizes.size());
  size_t next = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].assign(order.begin() + ptrdiff_t(next), order.begin() + ptrdiff_t(next + sizes[i]));
    next += sizes[i];
    std::sort(out[i].begin(), out[i].end());
  }
  return out;
}

// The rows of each class, shuffled. Refused before the tables are allocated, naming the label
// that makes them so wide.
Parts classPools(std::span<const int32_t> labels, int32_t num_classes, size_t parts,
                 uint64_t seed) {
  if (num_classes < 1) throw std::invalid_argument("partition: num_classes must be >= 1");
  const auto classes = static_cast<size_t>(num_classes);
  if (uint64_t{parts} * classes > kMaxLabelSkewTable) {
    const int32_t largest = *std::max_element(labels.begin(), labels.end());
    throw std::invalid_argument(
        "partition: label skew needs tables of " + std::to_string(parts) + " workers x " +
        std::to_string(classes) + " classes (the largest label is " + std::to_string(largest) +
        "), more than " + std::to_string(kMaxLabelSkewTable) +
        " entries; number the classes densely from 0, or partition without label skew "
        "(dirichlet_alpha 0)");
  }
  Parts pools(classes);
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] < 0 || labels[r] >= num_classes) {
      throw std::invalid_argument("partition: label " + std::to_string(labels[r]) + " of row " +
                                  std::to_string(r) + " outside [0, " +
                                  std::to_string(num_classes) + ")");
    }
    pools[size_t(labels[r])].push_back(r);
  }
  Rng pool_rng(deriveSeed(seed, kClassPools));
  for (auto& pool : pools) detail::shuffle(pool.begin(), pool.end(), pool_rng);
  return pools;
}

// The class pools being handed out: the rows of each class and how many are already given.
struct Pools {
  Parts rows;
  std::vector<size_t> cursor;

  // Gives worker `out` the next `take` rows of class c.
  void give(size_t c, size_t take, std::vector<size_t>& out) {
    auto first = rows[c].begin() + ptrdiff_t(cursor[c]);
    out.insert(out.end(), first, first + ptrdiff_t(take));
    cursor[c] += take;
  }
};

// Grants the workers' requests class by class; an over-asked class is split in proportion to the
// requests.
void grantRequests(const Parts& want, Pools& pools, Parts& out) {
  const size_t parts = want.size();
  std::vector<double> requests(parts);
  for (size_t c = 0; c < pools.rows.size(); ++c) {
    size_t demand = 0;
    for (size_t i = 0; i < parts; ++i) {
      requests[i] = double(want[i][c]);
      demand += want[i][c];
    }
    std::vector<size_t> grant(parts);
    if (demand <= pools.rows[c].size()) {
      for (size_t i = 0; i < parts; ++i) grant[i] = want[i][c];
    } else {
      grant = apportion(pools.rows[c].size(), requests);
    }
    for (size_t i = 0; i < parts; ++i) pools.give(c, grant[i], out[i]);
  }
}

// Tops each worker up to its size from the classes it prefers most that still have rows: the
// leftover rows number exactly the total shortfall, since sizes sum to the rows.
void topUp(const std::vector<std::vector<double>>& mix, const std::vector<size_t>& sizes,
           Pools& pools, Parts& out) {
  std::vector<size_t> preference(pools.rows.size());
  for (size_t i = 0; i < out.size(); ++i) {
    std::iota(preference.begin(), preference.end(), size_t{0});
    std::stable_sort(preference.begin(), preference.end(),
                     [&](size_t a, size_t b) { return mix[i][a] > mix[i][b]; });
    for (size_t c : preference) {
      if (out[i].size() >= sizes[i]) break;
      const size_t take =
          std::min(sizes[i] - out[i].size(), pools.rows[c].size() - pools.cursor[c]);
      pools.give(c, take, out[i]);
    }
    std::sort(out[i].begin(), out[i].end());
  }
}

}  // namespace

std::vector<std::vector<size_t>> partition(std::span<const int32_t> labels, int32_t num_classes,
                                           size_t parts, const PartitionSpec& spec) {
  if (parts == 0) throw std::invalid_argument("partition: parts must be >= 1");
  if (labels.size() < parts) {
    throw std::invalid_argument("partition: " + std::to_string(labels.size()) +
                                " rows cannot give each of " + std::to_string(parts) +
                                " workers a row");
  }
  if (!std::isfinite(spec.dirichlet_alpha) || spec.dirichlet_alpha < 0) {
    throw std::invalid_argument("partition: dirichlet_alpha must be finite and >= 0");
  }
  const auto sizes = workerSizes(labels.size(), parts, spec.volume_ratio);
  if (spec.dirichlet_alpha == 0) return iidPartition(labels.size(), sizes, spec.seed);

  Pools pools{classPools(labels, num_classes, parts, spec.seed), {}};
  const size_t classes = pools.rows.size();
  pools.cursor.assign(classes, 0);
  // What each worker asks for: its size split by its own class proportions.
  Rng dir_rng(deriveSeed(spec.seed, kDirichlet));
  std::vector<std::vector<double>> mix(parts);
  Parts want(parts);
  for (size_t i = 0; i < parts; ++i) {
    mix[i] = dirichlet(classes, spec.dirichlet_alpha, dir_rng);
    want[i] = apportion(sizes[i], mix[i]);
  }
  Parts out(parts);
  grantRequests(want, pools, out);
  topUp(mix, sizes, pools, out);
  return out;
}

}  // namespace tern::ml
