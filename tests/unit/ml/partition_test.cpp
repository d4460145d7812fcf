#include "common/ml/partition.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

using namespace tern::ml;

namespace {

// Balanced labels 0..classes-1 repeated, the usual shape of MNIST-like data.
std::vector<int32_t> balancedLabels(size_t rows, int32_t classes) {
  std::vector<int32_t> y(rows);
  for (size_t i = 0; i < rows; ++i) y[i] = int32_t(i % size_t(classes));
  return y;
}

// Every row index appears at most once across workers; returns how many appeared.
size_t checkDisjoint(const std::vector<std::vector<size_t>>& parts, size_t rows) {
  std::vector<int> seen(rows, 0);
  size_t total = 0;
  for (const auto& p : parts) {
    for (size_t r : p) {
      REQUIRE(r < rows);
      ++seen[r];
      ++total;
    }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s <= 1; }));
  return total;
}

double largestClassFraction(const std::vector<size_t>& rows, const std::vector<int32_t>& labels,
                            int32_t classes) {
  std::vector<size_t> counts(size_t(classes), 0);
  for (size_t r : rows) ++counts[size_t(labels[r])];
  return double(*std::max_element(counts.begin(), counts.end())) / double(rows.size());
}

}  // namespace

TEST_CASE("geometric shares sum to one, descend, and have first/last equal to the ratio") {
  for (const double ratio : {1.0, 10.0, 100.0, 1000.0}) {
    CAPTURE(ratio);
    const auto p = geometricShares(10, ratio);
    REQUIRE(p.size() == 10);
    CHECK(std::accumulate(p.begin(), p.end(), 0.0) == doctest::Approx(1.0));
    CHECK(p.front() / p.back() == doctest::Approx(ratio));
    // Geometric: every consecutive ratio is ratio^(1/9).
    for (size_t i = 0; i + 1 < p.size(); ++i) {
      CHECK(p[i] / p[i + 1] == doctest::Approx(std::pow(ratio, 1.0 / 9)));
    }
  }
  CHECK(geometricShares(1, 50.0) == std::vector<double>{1.0});
  CHECK_THROWS_AS(geometricShares(0, 2.0), std::invalid_argument);
  CHECK_THROWS_AS(geometricShares(3, 0.5), std::invalid_argument);
}

TEST_CASE("IID partition with volume skew follows the shares within rounding and uses all rows") {
  const size_t rows = 10007;
  const auto labels = balancedLabels(rows, 10);
  PartitionSpec spec;
  spec.volume_ratio = 100.0;
  spec.seed = 4;
  const auto parts = partition(labels, 10, 10, spec);
  const auto shares = geometricShares(10, 100.0);
  REQUIRE(parts.size() == 10);
  for (size_t i = 0; i < parts.size(); ++i) {
    CHECK(std::abs(double(parts[i].size()) - shares[i] * double(rows)) < 1.0);
    CHECK(std::is_sorted(parts[i].begin(), parts[i].end()));
  }
  CHECK(checkDisjoint(parts, rows) == rows);
}

TEST_CASE("same seed gives the same partition and a different seed a different one") {
  const auto labels = balancedLabels(3000, 10);
  for (const double alpha : {0.0, 0.5}) {
    CAPTURE(alpha);
    PartitionSpec spec;
    spec.dirichlet_alpha = alpha;
    spec.volume_ratio = 10.0;
    spec.seed = 11;
    const auto a = partition(labels, 10, 8, spec);
    const auto b = partition(labels, 10, 8, spec);
    CHECK(a == b);
    spec.seed = 12;
    const auto c = partition(labels, 10, 8, spec);
    CHECK(a != c);
  }
}

TEST_CASE("small Dirichlet alpha gives skewed label histograms, IID does not") {
  const auto labels = balancedLabels(6000, 10);
  PartitionSpec iid;
  iid.seed = 5;
  PartitionSpec skewed = iid;
  skewed.dirichlet_alpha = 0.1;
  const auto iid_parts = partition(labels, 10, 10, iid);
  const auto skewed_parts = partition(labels, 10, 10, skewed);
  double iid_mean = 0, skewed_mean = 0;
  for (size_t i = 0; i < 10; ++i) {
    iid_mean += largestClassFraction(iid_parts[i], labels, 10) / 10;
    skewed_mean += largestClassFraction(skewed_parts[i], labels, 10) / 10;
  }
  // IID shards of 600 rows hold each class about 10% of the time; Dirichlet(0.1) puts most of
  // a worker's mass on one or two classes.
  CHECK(iid_mean < 0.15);
  CHECK(skewed_mean > 0.5);
  CHECK(checkDisjoint(skewed_parts, labels.size()) == labels.size());
  for (const auto& p : skewed_parts) CHECK(p.size() == 600);
}

TEST_CASE("label skew combined with volume skew keeps the volume shares and uses all rows") {
  const size_t rows = 5000;
  const auto labels = balancedLabels(rows, 10);
  PartitionSpec spec;
  spec.dirichlet_alpha = 0.5;
  spec.volume_ratio = 1000.0;
  spec.seed = 9;
  const auto parts = partition(labels, 10, 10, spec);
  const auto shares = geometricShares(10, 1000.0);
  for (size_t i = 0; i < parts.size(); ++i) {
    CHECK(std::abs(double(parts[i].size()) - shares[i] * double(rows)) < 1.0);
    CHECK(!parts[i].empty());
  }
  CHECK(checkDisjoint(parts, rows) == rows);
}

TEST_CASE("every worker gets at least one row even when its share rounds to zero") {
  const auto labels = balancedLabels(20, 2);
  for (const double alpha : {0.0, 0.1}) {
    PartitionSpec spec;
    spec.dirichlet_alpha = alpha;
    spec.volume_ratio = 1000.0;
    const auto parts = partition(labels, 2, 10, spec);
    for (const auto& p : parts) CHECK(p.size() >= 1);
    CHECK(checkDisjoint(parts, labels.size()) == labels.size());
  }
  // As many workers as rows: one row each.
  const auto one_each = partition(balancedLabels(7, 3), 3, 7, PartitionSpec{});
  for (const auto& p : one_each) CHECK(p.size() == 1);
}

TEST_CASE("partition rejects too few rows, out-of-range labels and a negative alpha") {
  const auto labels = balancedLabels(5, 2);
  CHECK_THROWS_AS(partition(labels, 2, 6, PartitionSpec{}), std::invalid_argument);
  PartitionSpec skewed;
  skewed.dirichlet_alpha = 1.0;
  CHECK_THROWS_AS(partition(labels, 1, 2, skewed), std::invalid_argument);
  PartitionSpec negative;
  negative.dirichlet_alpha = -1.0;
  CHECK_THROWS_AS(partition(labels, 2, 2, negative), std::invalid_argument);
}

TEST_CASE(
    "label skew over more workers x classes than its table budget is refused, naming the label") {
  // One row labelled 65535 among 199 binary ones made 200 workers x 65536 classes: 218 MB.
  std::vector<int32_t> labels = balancedLabels(200, 2);
  labels[57] = 65535;
  PartitionSpec skewed;
  skewed.dirichlet_alpha = 0.5;
  std::string msg;
  try {
    partition(labels, 65536, 200, skewed);
  } catch (const std::invalid_argument& e) {
    msg = e.what();
  }
  CHECK(msg ==
        "partition: label skew needs tables of 200 workers x 65536 classes (the largest label is "
        "65535), more than 4194304 entries; number the classes densely from 0, or partition "
        "without label skew (dirichlet_alpha 0)");
  // Without label skew there are no per-class tables: the same rows partition.
  const auto iid = partition(labels, 65536, 200, PartitionSpec{});
  CHECK(checkDisjoint(iid, labels.size()) == labels.size());
  // The budget is 2^22 entries: 1025 workers x 4096 classes are just past it; 100 workers over
  // as many classes are well within (running at the budget itself would make a slow test).
  const auto wide = balancedLabels(1025, 4096);
  CHECK_THROWS_AS(partition(wide, 4096, 1025, skewed), std::invalid_argument);
  CHECK(checkDisjoint(partition(wide, 4096, 100, skewed), wide.size()) == wide.size());
}
