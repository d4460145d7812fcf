#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ml/data_source.hpp"
#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"

using namespace tern::ml;

TEST_CASE("syntheticSparse rows are unit-norm with exactly nnz_per_row distinct features") {
  const Dataset d = syntheticSparse(2000, 5000, 20, 3);
  REQUIRE(d.is_sparse);
  CHECK(d.rows() == 2000);
  CHECK(d.features() == 5000);
  CHECK(d.num_classes == 2);
  for (Eigen::Index i = 0; i < d.sparse.outerSize(); ++i) {
    int count = 0;
    int previous = -1;
    double norm2 = 0;
    for (SparseMatrix::InnerIterator it(d.sparse, i); it; ++it) {
      CHECK(it.col() > previous);  // strictly increasing: distinct and sorted
      previous = int(it.col());
      norm2 += double(it.value()) * it.value();
      ++count;
    }
    CHECK(count == 20);
    CHECK(norm2 == doctest::Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("syntheticSparse feature popularity is heavy-tailed and labels are balanced") {
  const Dataset d = syntheticSparse(2000, 5000, 20, 4);
  std::vector<size_t> counts(5000, 0);
  for (Eigen::Index i = 0; i < d.sparse.outerSize(); ++i) {
    for (SparseMatrix::InnerIterator it(d.sparse, i); it; ++it) ++counts[size_t(it.col())];
  }
  std::sort(counts.rbegin(), counts.rend());
  const double total = 2000.0 * 20;
  // Under Zipf(1) the top 1% of 5000 features draw H(50)/H(5000) ~ 49% of the samples (less
  // after removing repeats within a row); uniform popularity would give 1%.
  const double top = double(std::accumulate(counts.begin(), counts.begin() + 50, size_t{0}));
  CHECK(top / total > 0.25);
  CHECK(counts[0] > 1000);  // the most popular feature is in most rows
  size_t ones = 0;
  for (int32_t y : d.labels) ones += size_t(y);
  CHECK(double(ones) / 2000 == doctest::Approx(0.5).epsilon(0.1));
}

TEST_CASE("syntheticSparse labels come from a linear model that logistic regression can learn") {
  // d << n, so a linear fit cannot memorise random labels: high accuracy means real structure.
  const Dataset d = syntheticSparse(4000, 100, 10, 5);
  ModelSpec s;
  s.kind = "logistic";
  s.features = 100;
  const auto model = makeModel(s);
  std::vector<float> params(model->numParams(), 0.0f), grad(model->numParams());
  const double lr = 4.0 / *model->smoothness(d);
  for (int it = 0; it < 300; ++it) {
    model->lossAndGradient(params, d, {}, grad);
    for (size_t j = 0; j < params.size(); ++j) params[j] -= float(lr) * grad[j];
  }
  CHECK(model->accuracy(params, d) > 0.85);
}

TEST_CASE("synthetic generators are deterministic in the seed") {
  const Dataset a = syntheticSparse(100, 300, 8, 21);
  const Dataset b = syntheticSparse(100, 300, 8, 21);
  const Dataset c = syntheticSparse(100, 300, 8, 22);
  CHECK(DenseMatrix(a.sparse) == DenseMatrix(b.sparse));
  CHECK(a.labels == b.labels);
  CHECK(DenseMatrix(a.sparse) != DenseMatrix(c.sparse));
  const Dataset x = syntheticDense(50, 7, 3, 1);
  const Dataset y = syntheticDense(50, 7, 3, 1);
  CHECK(x.dense == y.dense);
  CHECK(x.labels == y.labels);
  CHECK_THROWS_AS(syntheticSparse(10, 5, 6, 1), std::invalid_argument);
}

TEST_CASE("syntheticDense draws balanced classes around separate Gaussian means") {
  const Dataset d = syntheticDense(3000, 8, 3, 6);
  CHECK(d.num_classes == 3);
  std::vector<Eigen::VectorXd> sums(3, Eigen::VectorXd::Zero(8));
  std::vector<int> counts(3, 0);
  for (size_t i = 0; i < d.rows(); ++i) {
    sums[size_t(d.labels[i])] += d.dense.row(Eigen::Index(i)).cast<double>().transpose();
    ++counts[size_t(d.labels[i])];
  }
  CHECK(counts == std::vector<int>{1000, 1000, 1000});
  // Unit noise: the residual variance around each class mean is about 1 per feature.
  double residual = 0;
  for (size_t i = 0; i < d.rows(); ++i) {
    const auto y = size_t(d.labels[i]);
    residual += (d.dense.row(Eigen::Index(i)).cast<double>().transpose() - sums[y] / counts[y])
                    .squaredNorm();
  }
  CHECK(residual / (3000.0 * 8) == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("synthetic training and test splits are the generated rows cut once, disjoint") {
  for (const char* format : {"synthetic", "synthetic_sparse"}) {
    CAPTURE(format);
    DataSource src;
    src.format = format;
    src.rows = 101;
    src.features = 30;
    src.classes = 3;
    src.nnz_per_row = 5;
    src.seed = 9;
    src.test_fraction = 0.2;
    const Dataset all = loadDataset(src);  // Split::kAll
    src.split = DataSource::Split::kTrain;
    const Dataset train = loadDataset(src);
    src.split = DataSource::Split::kTest;
    const Dataset test = loadDataset(src);
    // round(101 * 0.2) = 20 test rows, the last ones generated.
    REQUIRE(train.rows() == 81);
    REQUIRE(test.rows() == 20);
    auto row = [](const Dataset& d, size_t i) {
      std::vector<float> r(d.features(), 0.0f);
      if (d.is_sparse) {
        for (SparseMatrix::InnerIterator it(d.sparse, Eigen::Index(i)); it; ++it) {
          r[size_t(it.col())] = it.value();
        }
      } else {
        for (size_t j = 0; j < r.size(); ++j) r[j] = d.dense(Eigen::Index(i), Eigen::Index(j));
      }
      return r;
    };
    for (size_t i = 0; i < all.rows(); ++i) {
      const bool in_train = i < 81;
      const Dataset& part = in_train ? train : test;
      const size_t k = in_train ? i : i - 81;
      CHECK(part.labels[k] == all.labels[i]);
      CHECK(row(part, k) == row(all, i));
    }
  }
}

namespace {

// The what() of the std::invalid_argument thrown by f, or a note of what happened instead.
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string invalidArgumentOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other exception: ") + e.what() + ">";
  }
  return "<no exception>";
}

}  // namespace

TEST_CASE("synthetic generators refuse sizes beyond their budgets before allocating, naming them") {
  // Each used to allocate what it was asked for, gigabytes, or die with std::bad_alloc.
  CHECK(invalidArgumentOf([] { syntheticDense(1u << 28, 1u << 28, 2, 1); }) ==
        "syntheticDense: 268435456 rows of 268435456 features in 2 classes: more features than "
        "a model takes (67108864)");
  // (2^20 rows + 2 means) x 256 features is 2^28 + 512 floats: one row of means too many.
  CHECK(invalidArgumentOf([] { syntheticDense(1u << 20, 256, 2, 1); }) ==
        "syntheticDense: 1048576 rows of 256 features in 2 classes: rows and class means hold "
        "more than 268435456 values (1 GiB of floats)");
  // The class means count: 2^16 classes of 2^13 features are 2^29 floats without any row.
  CHECK(contains(invalidArgumentOf([] { syntheticDense(10, 1u << 13, 1 << 16, 1); }),
                 "rows and class means hold more than 268435456 values"));
  CHECK(contains(invalidArgumentOf([] { syntheticDense((1u << 28) + 1, 1, 2, 1); }),
                 "268435457 rows of 1 features"));
  CHECK(invalidArgumentOf([] { syntheticSparse(1000, 1u << 28, 2, 1); }) ==
        "syntheticSparse: 1000 rows of 2 non-zeros in 268435456 features: more than 16777216 "
        "features (the generator keeps ~70 bytes a feature)");
  // 2^25 rows of 9 non-zeros are 9 x 2^25 > 2^28 values.
  CHECK(invalidArgumentOf([] { syntheticSparse(1u << 25, 100, 9, 1); }) ==
        "syntheticSparse: 33554432 rows of 9 non-zeros in 100 features: more than 268435456 "
        "non-zeros (1 GiB of floats)");
  CHECK(contains(invalidArgumentOf([] { syntheticSparse(10, 5, 6, 1); }),
                 "10 rows of 6 non-zeros in 5 features: need 1 <= nnz_per_row <= features"));
  // Within the budgets the generators still make what was asked.
  CHECK(syntheticDense(3, 4, 2, 1).dense.size() == 12);
  CHECK(syntheticSparse(3, 4, 2, 1).sparse.nonZeros() == 6);
}
