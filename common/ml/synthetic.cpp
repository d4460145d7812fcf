// Seeded synthetic datasets for tests and experiments that must not depend on downloads.
// Every random quantity comes from its own derived stream, so changing how one part is drawn
// does not reshuffle the others.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/detail/random.hpp"
#include "common/ml/model.hpp"
#include "common/util/rng.hpp"

namespace tern::ml {
namespace {

enum StreamTag : uint64_t { kMeans = 1, kLabels, kNoise, kPopularity, kRows, kHidden, kFlips };

// Probability that a sparse-task label is flipped, so the task is not perfectly separable.
constexpr double kLabelNoise = 0.02;
// Fraction of the features that carry weight in the hidden model of syntheticSparse.
constexpr double kHiddenSupport = 0.1;

using detail::gaussian;
using detail::uniform01;
using detail::uniformIndex;

// Walker/Vose alias table: O(1) draws from a fixed discrete distribution, which matters when
// drawing a million feature indices out of tens of thousands.
class AliasTable {
 public:
  explicit AliasTable(const std::vector<double>& weights)
      : probability_(weights.size()), alias_(weights.size()) {
    const size_t n = weights.size();
    const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
    std::vector<double> scaled(n);
    std::vector<size_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      scaled[i] = weights[i] * double(n) / sum;
      (scaled[i] < 1.0 ? small : large).push_back(i);
    }
    while (!small.empty() && !large.empty()) {
      const size_t s = small.back(), l = large.back();
      small.pop_back();
      probability_[s] = scaled[s];
      alias_[s] = l;
      scaled[l] -= 1.0 - scaled[s];
      if (scaled[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    // Whatever is left is 1 up to rounding.
    for (size_t i : small) probability_[i] = 1.0;
    for (size_t i : large) probability_[i] = 1.0;
  }

  size_t draw(Rng& rng) const {
    const size_t i = uniformIndex(rng, probability_.size());
    return uniform01(rng) < probability_[i] ? i : alias_[i];
  }

 private:
  std::vector<double> probability_;
  std::vector<size_t> alias_;
};

// Appends `count` distinct indices to out: drawn from the table while that makes progress
// (rejecting repeats keeps its shape among distinct draws), then uniformly from what is left
// once rejection stalls, which happens only when nearly every index is wanted. `seen` holds a
// mark per index; entries equal to `mark` count as taken.
void drawDistinct(const AliasTable& table, size_t count, std::vector<uint32_t>& seen, uint32_t mark,
                  Rng& rng, std::vector<size_t>& out) {
  const size_t start = out.size();
  const size_t max_attempts = 32 * count + 64;
  for (size_t attempt = 0; out.size() - start < count && attempt < max_attempts; ++attempt) {
    const size_t r = table.draw(rng);
    if (seen[r] == mark) continue;
    seen[r] = mark;
    out.push_back(r);
  }
  if (out.size() - start < count) {
    std::vector<size_t> unused;
    for (size_t r = 0; r < seen.size(); ++r) {
      if (seen[r] != mark) unused.push_back(r);
    }
    detail::shuffle(unused.begin(), unused.end(), rng);
    unused.resize(count - (out.size() - start));
    for (size_t r : unused) seen[r] = mark;
    out.insert(out.end(), unused.begin(), unused.end());
  }
}

// Features by popularity: Zipf(1) over ranks; which feature id holds which rank is a seeded
// permutation so popular features are spread over the index range like in real bag-of-words
// data.
struct FeatureRanks {
  AliasTable popularity;
  std::vector<double> idf;  // tf-idf-like magnitudes: rarer features weigh more when they occur
  std::vector<int32_t> feature_of_rank;
};

std::vector<double> zipfWeights(size_t features) {
  std::vector<double> zipf(features);
  for (size_t r = 0; r < features; ++r) zipf[r] = 1.0 / double(r + 1);
  return zipf;
}

FeatureRanks featureRanks(size_t features, uint64_t seed) {
  FeatureRanks f{AliasTable(zipfWeights(features)), std::vector<double>(features),
                 std::vector<int32_t>(features)};
  for (size_t r = 0; r < features; ++r) f.idf[r] = 1.0 + std::log(double(r + 1));
  std::iota(f.feature_of_rank.begin(), f.feature_of_rank.end(), 0);
  Rng pop_rng(deriveSeed(seed, kPopularity));
  detail::shuffle(f.feature_of_rank.begin(), f.feature_of_rank.end(), pop_rng);
  return f;
}

void checkSparseSizes(size_t rows, size_t features, size_t nnz_per_row) {
  const std::string sizes = std::to_string(rows) + " rows of " + std::to_string(nnz_per_row) +
                            " non-zeros in " + std::to_string(features) + " features";
  if (nnz_per_row == 0 || nnz_per_row > features) {
    throw std::invalid_argument("syntheticSparse: " + sizes +
                                ": need 1 <= nnz_per_row <= features");
  }
  if (features > kMaxSyntheticSparseFeatures) {
    throw std::invalid_argument("syntheticSparse: " + sizes + ": more than " +
                                std::to_string(kMaxSyntheticSparseFeatures) +
                                " features (the generator keeps ~70 bytes a feature)");
  }
  // The budget also keeps the non-zeros countable in the matrix's 32-bit indices.
  static_assert(kMaxSyntheticValues <= uint64_t(std::numeric_limits<int32_t>::max()));
  if (rows > kMaxSyntheticValues || uint64_t(rows) * nnz_per_row > kMaxSyntheticValues) {
    throw std::invalid_argument("syntheticSparse: " + sizes + ": more than " +
                                std::to_string(kMaxSyntheticValues) +
                                " non-zeros (1 GiB of floats)");
  }
}

// Rows of nnz_per_row distinct features drawn by popularity, with jittered tf-idf values, each
// row scaled to unit norm.
SparseMatrix sparseRows(const FeatureRanks& f, size_t rows, size_t nnz_per_row, uint64_t seed) {
  const size_t features = f.idf.size();
  Rng row_rng(deriveSeed(seed, kRows));
  std::vector<uint32_t> stamp(features, 0);  // stamp[r] == i + 1: rank r is already in row i
  std::vector<size_t> ranks;
  std::vector<std::pair<int32_t, float>> entries;
  std::vector<int32_t> outer{0};
  std::vector<int32_t> inner;
  std::vector<float> values;
  inner.reserve(rows * nnz_per_row);
  values.reserve(rows * nnz_per_row);
  for (size_t i = 0; i < rows; ++i) {
    ranks.clear();
    drawDistinct(f.popularity, nnz_per_row, stamp, static_cast<uint32_t>(i + 1), row_rng, ranks);
    entries.clear();
    double norm2 = 0;
    for (size_t r : ranks) {
      const double v = (0.5 + uniform01(row_rng)) * f.idf[r];
      entries.emplace_back(f.feature_of_rank[r], static_cast<float>(v));
      norm2 += v * v;
    }
    const double scale = 1.0 / std::sqrt(norm2);
    std::sort(entries.begin(), entries.end());
    for (const auto& [j, v] : entries) {
      inner.push_back(j);
      values.push_back(static_cast<float>(v * scale));
    }
    outer.push_back(static_cast<int32_t>(inner.size()));
  }
  return Eigen::Map<const SparseMatrix>(
      static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(features),
      static_cast<Eigen::Index>(inner.size()), outer.data(), inner.data(), values.data());
}

// Labels of a hidden sparse linear model; the bias is the median margin so both classes are
// common, and kLabelNoise of the labels are flipped. Its support is drawn by popularity, so the
// labels depend mostly on features that occur often enough to be learned (as topic labels depend
// on common words). Dividing by the idf makes each present support feature count alike in the
// margin, instead of the rare ones with their large tf-idf values deciding.
std::vector<int32_t> hiddenLabels(const FeatureRanks& f, const SparseMatrix& x, uint64_t seed) {
  const size_t features = f.idf.size();
  const auto rows = static_cast<size_t>(x.rows());
  Rng hidden_rng(deriveSeed(seed, kHidden));
  const auto support_size = std::max<size_t>(1, size_t(kHiddenSupport * double(features)));
  std::vector<uint32_t> in_support(features, 0);
  std::vector<size_t> support;
  drawDistinct(f.popularity, support_size, in_support, 1, hidden_rng, support);
  Eigen::VectorXd w = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(features));
  for (size_t r : support) w[Eigen::Index(f.feature_of_rank[r])] = gaussian(hidden_rng) / f.idf[r];
  const Eigen::VectorXd margins = x.cast<double>() * w;
  double bias = 0;
  if (rows > 0) {
    std::vector<double> sorted(margins.data(), margins.data() + margins.size());
    std::nth_element(sorted.begin(), sorted.begin() + Eigen::Index(rows / 2), sorted.end());
    bias = sorted[rows / 2];
  }
  Rng flip_rng(deriveSeed(seed, kFlips));
  std::vector<int32_t> labels(rows);
  for (size_t i = 0; i < rows; ++i) {
    int32_t y = margins[Eigen::Index(i)] > bias ? 1 : 0;
    if (uniform01(flip_rng) < kLabelNoise) y = 1 - y;
    labels[i] = y;
  }
  return labels;
}

}  // namespace

Dataset syntheticDense(size_t rows, size_t features, int32_t classes, uint64_t seed) {
  const std::string sizes = std::to_string(rows) + " rows of " + std::to_string(features) +
                            " features in " + std::to_string(classes) + " classes";
  if (features == 0 || classes < 1) {
    throw std::invalid_argument("syntheticDense: " + sizes +
                                ": need features >= 1 and classes >= 1");
  }
  if (features > kMaxFeatures) {
    throw std::invalid_argument("syntheticDense: " + sizes +
                                ": more features than a model takes (" +
                                std::to_string(kMaxFeatures) + ")");
  }
  // Checked before anything is allocated; with features bounded the product cannot overflow.
  if (rows > kMaxSyntheticValues ||
      (uint64_t(rows) + uint64_t(classes)) * features > kMaxSyntheticValues) {
    throw std::invalid_argument("syntheticDense: " + sizes +
                                ": rows and class means hold more than " +
                                std::to_string(kMaxSyntheticValues) + " values (1 GiB of floats)");
  }
  const auto d = static_cast<Eigen::Index>(features);
  Rng mean_rng(deriveSeed(seed, kMeans));
  DenseMatrix means(classes, d);
  for (Eigen::Index i = 0; i < means.size(); ++i)
    means.data()[i] = static_cast<float>(gaussian(mean_rng));

  Dataset out;
  out.num_classes = classes;
  out.labels.resize(rows);
  // Balanced classes in random order.
  for (size_t i = 0; i < rows; ++i) out.labels[i] = static_cast<int32_t>(i % size_t(classes));
  Rng label_rng(deriveSeed(seed, kLabels));
  detail::shuffle(out.labels.begin(), out.labels.end(), label_rng);

  Rng noise_rng(deriveSeed(seed, kNoise));
  out.dense.resize(static_cast<Eigen::Index>(rows), d);
  for (size_t i = 0; i < rows; ++i) {
    auto row = out.dense.row(static_cast<Eigen::Index>(i));
    row = means.row(out.labels[i]);
    for (Eigen::Index j = 0; j < d; ++j) row[j] += static_cast<float>(gaussian(noise_rng));
  }
  return out;
}

Dataset syntheticSparse(size_t rows, size_t features, size_t nnz_per_row, uint64_t seed) {
  checkSparseSizes(rows, features, nnz_per_row);
  const FeatureRanks ranks = featureRanks(features, seed);
  Dataset out;
  out.is_sparse = true;
  out.num_classes = 2;
  out.sparse = sparseRows(ranks, rows, nnz_per_row, seed);
  out.labels = hiddenLabels(ranks, out.sparse, seed);
  return out;
}

}  // namespace tern::ml
