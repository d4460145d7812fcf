#include "common/ml/dataset.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

using namespace tern::ml;

TEST_CASE("subset keeps the given rows in the given order for dense and sparse data") {
  const Dataset dense = syntheticDense(10, 3, 4, 1);
  const Dataset sparse = syntheticSparse(10, 30, 4, 2);
  const std::vector<size_t> rows{7, 2, 2, 9};
  for (const Dataset* d : {&dense, &sparse}) {
    const Dataset s = d->subset(rows);
    CHECK(s.is_sparse == d->is_sparse);
    CHECK(s.rows() == 4);
    CHECK(s.features() == d->features());
    CHECK(s.num_classes == d->num_classes);
    const DenseMatrix full = d->is_sparse ? DenseMatrix(d->sparse) : d->dense;
    const DenseMatrix got = s.is_sparse ? DenseMatrix(s.sparse) : s.dense;
    for (size_t k = 0; k < rows.size(); ++k) {
      CHECK(s.labels[k] == d->labels[rows[k]]);
      CHECK(got.row(Eigen::Index(k)) == full.row(Eigen::Index(rows[k])));
    }
  }
  const std::vector<size_t> bad{3, 10};
  CHECK_THROWS_AS(dense.subset(bad), std::out_of_range);
  CHECK_THROWS_AS(sparse.subset(bad), std::out_of_range);
}

TEST_CASE(
    "gatherInto reuses its target: same rows as subset, no new storage, bad rows change nothing") {
  const Dataset dense = syntheticDense(50, 6, 3, 4);
  const Dataset sparse = syntheticSparse(50, 40, 5, 5);
  for (const Dataset* d : {&dense, &sparse}) {
    CAPTURE(d->is_sparse);
    Dataset batch;
    const std::vector<size_t> first{4, 40, 4, 17, 0};
    d->gatherInto(first, batch);
    const float* storage = d->is_sparse ? batch.sparse.valuePtr() : batch.dense.data();
    const std::vector<size_t> second{49, 1, 33, 33, 8};
    d->gatherInto(second, batch);
    const Dataset expected = d->subset(second);
    CHECK(batch.labels == expected.labels);
    CHECK(batch.num_classes == expected.num_classes);
    CHECK(DenseMatrix(batch.is_sparse ? DenseMatrix(batch.sparse) : batch.dense) ==
          DenseMatrix(expected.is_sparse ? DenseMatrix(expected.sparse) : expected.dense));
    if (!d->is_sparse) CHECK(batch.dense.data() == storage);  // same shape: no reallocation
    const std::vector<size_t> bad{2, 50};
    CHECK_THROWS_AS(d->gatherInto(bad, batch), std::out_of_range);
    CHECK(batch.labels == expected.labels);
    CHECK_THROWS_AS(batch.gatherInto(second, batch), std::invalid_argument);
  }
}

TEST_CASE("toBinary labels a row 1 exactly when its class is among the positive classes") {
  Dataset d = syntheticDense(12, 2, 4, 3);
  const std::vector<int32_t> positive{1, 3};
  const Dataset b = toBinary(d, positive);
  CHECK(b.num_classes == 2);
  for (size_t i = 0; i < d.rows(); ++i) {
    CHECK(b.labels[i] == ((d.labels[i] == 1 || d.labels[i] == 3) ? 1 : 0));
  }
  CHECK(b.dense == d.dense);
}
