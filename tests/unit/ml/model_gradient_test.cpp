#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "test_support.hpp"

using namespace tern::ml;
using namespace tern::ml::testing;

namespace {

ModelSpec spec(const std::string& kind, size_t features, uint32_t classes, double l2,
               uint32_t hidden = 5) {
  ModelSpec s;
  s.kind = kind;
  s.features = uint32_t(features);
  s.classes = classes;
  s.hidden = hidden;
  s.l2 = l2;
  return s;
}

const std::vector<size_t> kSomeRows{5, 0, 11, 3, 3, 17, 8};  // unordered, with a repeat

}  // namespace

TEST_CASE("softmax gradient matches central differences on dense data, all rows and a subset") {
  const Dataset data = syntheticDense(24, 6, 3, 11);
  const auto model = makeModel(spec("softmax", 6, 3, 0.05));
  const auto params = gaussianParams(model->numParams(), 0.3, 1);
  checkGradient(*model, params, data, {});
  checkGradient(*model, params, data, kSomeRows);
}

TEST_CASE("softmax gradient matches central differences on sparse data") {
  const Dataset data = syntheticSparse(30, 12, 4, 12);
  const auto model = makeModel(spec("softmax", 12, 2, 0.05));
  const auto params = gaussianParams(model->numParams(), 1.0, 2);
  checkGradient(*model, params, data, {});
  checkGradient(*model, params, data, kSomeRows);
}

TEST_CASE("logistic gradient with l2 matches central differences on dense and sparse data") {
  const std::vector<int32_t> positive{0, 2};
  const Dataset dense = toBinary(syntheticDense(24, 5, 4, 13), positive);
  const auto dense_model = makeModel(spec("logistic", 5, 2, 0.1));
  checkGradient(*dense_model, gaussianParams(dense_model->numParams(), 0.3, 3), dense, {});
  checkGradient(*dense_model, gaussianParams(dense_model->numParams(), 0.3, 3), dense, kSomeRows);

  const Dataset sparse = syntheticSparse(30, 12, 4, 14);
  const auto sparse_model = makeModel(spec("logistic", 12, 2, 0.1));
  checkGradient(*sparse_model, gaussianParams(sparse_model->numParams(), 1.0, 4), sparse, {});
  checkGradient(*sparse_model, gaussianParams(sparse_model->numParams(), 1.0, 4), sparse,
                kSomeRows);
}

TEST_CASE("mlp gradient with l2 matches central differences on dense and sparse data") {
  // A smaller step for the MLP: a larger one would often cross a ReLU kink.
  const Dataset dense = syntheticDense(20, 4, 3, 15);
  const auto model = makeModel(spec("mlp", 4, 3, 0.05, 6));
  tern::Rng rng(5);
  std::vector<float> params(model->numParams());
  model->init(params, rng);
  // init leaves the biases at zero; give them values so their gradients are exercised too.
  const auto jitter = gaussianParams(params.size(), 0.1, 6);
  for (size_t j = 0; j < params.size(); ++j) params[j] += jitter[j];
  checkGradient(*model, params, dense, {}, 3e-3, 2e-3, 2e-2);
  checkGradient(*model, params, dense, kSomeRows, 3e-3, 2e-3, 2e-2);

  const Dataset sparse = syntheticSparse(30, 12, 4, 16);
  const auto sparse_model = makeModel(spec("mlp", 12, 2, 0.05, 6));
  std::vector<float> sparse_params(sparse_model->numParams());
  sparse_model->init(sparse_params, rng);
  for (auto& p : sparse_params) p *= 3.0f;  // unit-norm rows need larger weights for signal
  checkGradient(*sparse_model, sparse_params, sparse, {}, 3e-3, 2e-3, 2e-2);
}

TEST_CASE("sparse and dense copies of the same data give the same loss and gradient") {
  const Dataset sparse = syntheticSparse(40, 15, 5, 17);
  const Dataset dense = densified(sparse);
  for (const char* kind : {"softmax", "logistic", "mlp"}) {
    CAPTURE(kind);
    const auto model = makeModel(spec(kind, 15, 2, 0.01, 4));
    const auto params = gaussianParams(model->numParams(), 1.0, 7);
    std::vector<float> gs(model->numParams()), gd(model->numParams());
    const double ls = model->lossAndGradient(params, sparse, kSomeRows, gs);
    const double ld = model->lossAndGradient(params, dense, kSomeRows, gd);
    CHECK(ls == doctest::Approx(ld).epsilon(1e-5));
    for (size_t j = 0; j < gs.size(); ++j) CHECK(gs[j] == doctest::Approx(gd[j]).epsilon(1e-4));
    CHECK(model->accuracy(params, sparse) == model->accuracy(params, dense));
  }
}

TEST_CASE("a subset of rows gives the same loss as the gathered rows as a data set") {
  const Dataset data = syntheticDense(30, 5, 3, 18);
  const auto model = makeModel(spec("softmax", 5, 3, 0.0));
  const auto params = gaussianParams(model->numParams(), 0.5, 8);
  const Dataset gathered = data.subset(kSomeRows);
  CHECK(model->loss(params, data, kSomeRows) ==
        doctest::Approx(model->loss(params, gathered)).epsilon(1e-6));
}

TEST_CASE("softmax loss at zero parameters is log(classes) and the l2 term is l2/2 |W|^2") {
  const Dataset data = syntheticDense(10, 4, 5, 19);
  const auto model = makeModel(spec("softmax", 4, 5, 0.3));
  std::vector<float> params(model->numParams(), 0.0f);
  CHECK(model->loss(params, data) == doctest::Approx(std::log(5.0)));
  // Biases are not penalised: moving them uniformly shifts all logits and changes nothing.
  for (size_t j = 20; j < 25; ++j) params[j] = 2.0f;
  CHECK(model->loss(params, data) == doctest::Approx(std::log(5.0)));
  params[0] = 2.0f;  // one weight: the penalty alone adds 0.3/2 * 4 on top of the data term
  const double with_weight = model->loss(params, data);
  auto unpenalised = makeModel(spec("softmax", 4, 5, 0.0));
  CHECK(with_weight - unpenalised->loss(params, data) == doctest::Approx(0.6));
}

TEST_CASE("makeModel rejects unknown kinds and zero sizes, and size mismatches are rejected") {
  CHECK_THROWS_AS(makeModel(spec("svm", 4, 2, 0.0)), std::invalid_argument);
  CHECK_THROWS_AS(makeModel(spec("softmax", 0, 2, 0.0)), std::invalid_argument);
  CHECK_THROWS_AS(makeModel(spec("softmax", 4, 0, 0.0)), std::invalid_argument);
  CHECK_THROWS_AS(makeModel(spec("mlp", 4, 2, 0.0, 0)), std::invalid_argument);
  const auto model = makeModel(spec("softmax", 4, 3, 0.0));
  const Dataset wrong_features = syntheticDense(5, 3, 3, 1);
  std::vector<float> params(model->numParams()), grad(model->numParams());
  CHECK_THROWS_AS(model->loss(params, wrong_features), std::invalid_argument);
  const Dataset right = syntheticDense(5, 4, 3, 1);
  std::vector<float> short_params(model->numParams() - 1);
  CHECK_THROWS_AS(model->loss(short_params, right), std::invalid_argument);
  const Dataset four_classes = syntheticDense(8, 4, 4, 1);
  CHECK_THROWS_AS(model->lossAndGradient(params, four_classes, {}, grad), std::invalid_argument);
  const auto logistic = makeModel(spec("logistic", 4, 2, 0.0));
  std::vector<float> lp(logistic->numParams());
  CHECK_THROWS_AS(logistic->loss(lp, four_classes), std::invalid_argument);
}

TEST_CASE("softmax regression by gradient descent reaches over 90% train accuracy") {
  const Dataset data = syntheticDense(400, 10, 4, 21);
  const auto model = makeModel(spec("softmax", 10, 4, 0.0));
  tern::Rng rng(1);
  std::vector<float> params(model->numParams()), grad(model->numParams());
  model->init(params, rng);
  CHECK(model->accuracy(params, data) < 0.5);  // zeros predict class 0 everywhere
  const double lr = 1.0 / *model->smoothness(data);
  double previous = model->loss(params, data);
  for (int it = 0; it < 100; ++it) {
    const double loss = model->lossAndGradient(params, data, {}, grad);
    CHECK(loss <= previous + 1e-6);  // a 1/L step never increases a convex L-smooth loss
    previous = loss;
    for (size_t j = 0; j < params.size(); ++j) params[j] -= float(lr) * grad[j];
  }
  CHECK(model->accuracy(params, data) > 0.9);
}

TEST_CASE("mlp init is deterministic in the generator and scaled like He initialisation") {
  const auto model = makeModel(spec("mlp", 400, 10, 0.0, 50));
  std::vector<float> a(model->numParams()), b(model->numParams());
  tern::Rng r1(3), r2(3);
  model->init(a, r1);
  model->init(b, r2);
  CHECK(a == b);
  double sum2 = 0;
  for (size_t j = 0; j < 400 * 50; ++j) sum2 += double(a[j]) * a[j];
  CHECK(sum2 / (400 * 50) == doctest::Approx(2.0 / 400).epsilon(0.05));
  for (size_t j = 400 * 50; j < 400 * 50 + 50; ++j) CHECK(a[j] == 0.0f);
}

TEST_CASE("paramsOf counts what a built model holds, and specs beyond the limits are refused") {
  for (const auto& s : {spec("softmax", 784, 10, 0.0), spec("logistic", 47236, 2, 0.0),
                        spec("mlp", 784, 10, 0.0, 64), spec("mlp", 1, 2, 0.0, 1)}) {
    CAPTURE(s.kind);
    // Counted by hand from the layers: weights plus a bias per output.
    const uint64_t by_hand = s.kind == "softmax"    ? uint64_t(s.classes) * (s.features + 1)
                             : s.kind == "logistic" ? uint64_t(s.features) + 1
                                                    : uint64_t(s.hidden) * (s.features + 1) +
                                                          uint64_t(s.classes) * (s.hidden + 1);
    CHECK(paramsOf(s) == by_hand);
    CHECK(makeModel(s)->numParams() == by_hand);
  }
  CHECK(paramsOf(spec("nope", 3, 2, 0.0)) == 0);
  // Each limit alone, and a product beyond kMaxParams from factors within their limits.
  CHECK_THROWS_AS(makeModel(spec("softmax", 3, kMaxClasses + 1, 0.0)), std::invalid_argument);
  CHECK_THROWS_AS(makeModel(spec("softmax", 3, 4000000000u, 0.0)), std::invalid_argument);
  CHECK_THROWS_AS(makeModel(spec("logistic", kMaxFeatures + 1, 2, 0.0)), std::invalid_argument);
  CHECK_THROWS_AS(makeModel(spec("mlp", 3, 2, 0.0, kMaxHidden + 1)), std::invalid_argument);
  CHECK_THROWS_AS(makeModel(spec("softmax", kMaxFeatures, kMaxClasses, 0.0)),
                  std::invalid_argument);
  CHECK(paramsOf(spec("softmax", kMaxFeatures, kMaxClasses, 0.0)) > kMaxParams);
  // The largest mlp the limits allow is counted without overflow.
  CHECK(paramsOf(spec("mlp", kMaxFeatures, kMaxClasses, 0.0, kMaxHidden)) ==
        uint64_t(kMaxHidden) * (kMaxFeatures + 1) + uint64_t(kMaxClasses) * (kMaxHidden + 1));
  // Exactly kMaxParams is allowed (building the model allocates no parameters).
  CHECK(paramsOf(spec("softmax", (1u << 20) - 1, 1u << 10, 0.0)) == kMaxParams);
  CHECK_NOTHROW(makeModel(spec("softmax", (1u << 20) - 1, 1u << 10, 0.0)));
}

TEST_CASE(
    "a gradient in chunks is the gradient of the whole batch, and a stop ends it between chunks") {
  const Dataset dense = syntheticDense(40, 6, 3, 21);
  const Dataset sparse = syntheticSparse(40, 12, 4, 22);
  // Unordered rows with repeats, more than any chunk below.
  std::vector<size_t> rows;
  for (size_t i = 0; i < 37; ++i) rows.push_back((i * 7 + 3) % 40);
  struct Case {
    const char* name;
    const Dataset* data;
    ModelSpec spec;
  };
  for (const Case& c : {Case{"softmax dense", &dense, spec("softmax", 6, 3, 0.05)},
                        Case{"logistic sparse", &sparse, spec("logistic", 12, 2, 0.1)},
                        Case{"mlp dense", &dense, spec("mlp", 6, 3, 0.02)}}) {
    CAPTURE(c.name);
    Dataset data = *c.data;
    if (c.spec.kind == "logistic")
      for (auto& y : data.labels) y = y % 2;
    const auto model = makeModel(c.spec);
    const auto params = gaussianParams(model->numParams(), 0.4, 3);
    std::vector<float> whole(model->numParams());
    const double whole_loss = model->lossAndGradient(params, data, rows, whole);
    for (size_t chunk : {size_t(1), size_t(5), size_t(16), size_t(36), rows.size()}) {
      CAPTURE(chunk);
      Dataset scratch;
      std::vector<float> chunk_grad, grad(model->numParams(), 7.0f);
      const auto loss =
          chunkedLossAndGradient(*model, params, data, rows, chunk, scratch, chunk_grad, grad);
      REQUIRE(loss);
      CHECK(*loss == doctest::Approx(whole_loss).epsilon(1e-6));
      for (size_t j = 0; j < grad.size(); ++j) {
        CAPTURE(j);
        CHECK(grad[j] == doctest::Approx(whole[j]).epsilon(1e-5).scale(1e-3));
      }
      // One chunk is the model's own call, bit for bit.
      if (chunk >= rows.size()) {
        CHECK(*loss == whole_loss);
        CHECK(grad == whole);
      }
    }
    // Asked before every chunk but the first; a stop at the third ask ends it there.
    Dataset scratch;
    std::vector<float> chunk_grad, grad(model->numParams());
    size_t asked = 0;
    CHECK(chunkedLossAndGradient(*model, params, data, rows, 5, scratch, chunk_grad, grad,
                                 [&] { return ++asked == 3; }) == std::nullopt);
    CHECK(asked == 3);
    asked = 0;
    CHECK(chunkedLossAndGradient(*model, params, data, rows, 5, scratch, chunk_grad, grad, [&] {
      ++asked;
      return false;
    }));
    CHECK(asked == (rows.size() + 4) / 5 - 1);
  }
  Dataset scratch;
  std::vector<float> chunk_grad, grad(4);
  const auto model = makeModel(spec("softmax", 6, 3, 0.0));
  grad.resize(model->numParams());
  const auto params = gaussianParams(model->numParams(), 0.4, 3);
  CHECK_THROWS_AS(chunkedLossAndGradient(*model, params, dense, {}, 5, scratch, chunk_grad, grad),
                  std::invalid_argument);
  CHECK_THROWS_AS(chunkedLossAndGradient(*model, params, dense, rows, 0, scratch, chunk_grad, grad),
                  std::invalid_argument);
}

TEST_CASE("an accuracy in chunks is the accuracy of the whole set, with a pause between chunks") {
  const Dataset data = syntheticDense(53, 6, 3, 23);
  const auto model = makeModel(spec("mlp", 6, 3, 0.0));
  const auto params = gaussianParams(model->numParams(), 0.8, 4);
  const double whole = model->accuracy(params, data);
  REQUIRE(whole > 0.0);
  REQUIRE(whole < 1.0);
  for (size_t chunk : {size_t(1), size_t(7), size_t(52), size_t(53), size_t(100)}) {
    CAPTURE(chunk);
    Dataset scratch;
    size_t pauses = 0;
    CHECK(chunkedAccuracy(*model, params, data, chunk, scratch, [&] { ++pauses; }) == whole);
    CHECK(pauses == (data.rows() + chunk - 1) / chunk - 1);
  }
  // Chunks of about 2^28 rows x parameters, 256 to 4,096 rows.
  CHECK(chunkRows(7850) == 4096);
  CHECK(chunkRows(101770) == (size_t{1} << 28) / 101770);
  CHECK(chunkRows(size_t{1} << 24) == 256);
  CHECK(chunkRows(0) == 4096);
}
