// The defences against poisoned pushes, each against an independent reference: weights capped
// (hand-computed water-filling), norms clipped (hand-computed), and the coordinate-wise trimmed
// mean and median against brute force over small hand-made pushes; and one poisoned push (1e6
// values, 2^40 claimed samples) moving the model by a bounded step.
#include "server/robust_aggregation.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/util/float_passes.hpp"
#include "server/aggregator.hpp"
#include "tests/unit/coordinator/dense_gradient.hpp"

using namespace tern;
using namespace tern::server;

namespace {

compression::SparseGradient sparse(uint32_t dim, std::vector<uint32_t> idx, std::vector<float> v) {
  compression::SparseGradient g;
  g.dim = dim;
  g.indices = std::move(idx);
  g.values = std::move(v);
  return g;
}

// Brute force: drop the smallest and the largest value `cut` times, then average the rest.
double bruteTrimmedMean(std::vector<float> v, size_t cut) {
  for (size_t c = 0; c < cut; ++c) {
    v.erase(std::min_element(v.begin(), v.end()));
    v.erase(std::max_element(v.begin(), v.end()));
  }
  double s = 0.0;
  for (float x : v) s += x;
  return s / double(v.size());
}

// Brute force: the values with as many others at or below them as at or above them, averaged.
double bruteMedian(const std::vector<float>& v) {
  std::vector<double> mids;
  for (size_t i = 0; i < v.size(); ++i) {
    size_t below = 0, above = 0;
    for (size_t k = 0; k < v.size(); ++k) {
      if (k == i) continue;
      below += v[k] < v[i] || (v[k] == v[i] && k < i);
      above += v[k] > v[i] || (v[k] == v[i] && k > i);
    }
    if (below + 1 >= above && above + 1 >= below) mids.push_back(v[i]);
  }
  double s = 0.0;
  for (double x : mids) s += x;
  return s / double(mids.size());
}

}  // namespace

TEST_CASE("weights are the sample counts themselves when no share exceeds the cap") {
  const PushWeights w = cappedWeights({100, 300}, 1.0);
  CHECK_FALSE(w.capped);
  CHECK(w.weights == std::vector<double>{100.0, 300.0});
  CHECK(w.normaliser == 400.0);
}

TEST_CASE(
    "a share over the cap is held at it and the excess spread over the others in proportion") {
  // 1000 of 1300 samples: capped at 0.5; the others share 0.5 as 100:200 -> 1/6 and 2/6.
  const PushWeights w = cappedWeights({100, 1000, 200}, 0.5);
  CHECK(w.capped);
  CHECK(w.normaliser == 1.0);
  CHECK(w.weights[0] == doctest::Approx(0.5 / 3));
  CHECK(w.weights[1] == doctest::Approx(0.5));
  CHECK(w.weights[2] == doctest::Approx(1.0 / 3));
  // Spreading pushes a second share over the cap: both held at 0.4, the third gets 0.2.
  const PushWeights v = cappedWeights({10, 1000, 500}, 0.4);
  CHECK(v.weights[0] == doctest::Approx(0.2));
  CHECK(v.weights[1] == doctest::Approx(0.4));
  CHECK(v.weights[2] == doctest::Approx(0.4));
  // A cap no n shares can meet (3 * 0.2 < 1): equal shares.
  const PushWeights e = cappedWeights({1, 2, 3}, 0.2);
  for (double x : e.weights) CHECK(x == doctest::Approx(1.0 / 3));
}

TEST_CASE("the automatic cap is half, or twice the fair share of fewer than four pushers") {
  CHECK(shareCap(0.0, 1) == 2.0);
  CHECK(shareCap(0.0, 2) == 1.0);
  CHECK(shareCap(0.0, 3) == doctest::Approx(2.0 / 3));
  CHECK(shareCap(0.0, 8) == 0.5);
  CHECK(shareCap(0.3, 8) == 0.3);
}

TEST_CASE("a push's norm is the square root of its sum of squares, at every length") {
  // Against a long-double sum in one chain; lengths around the eight running sums' stride.
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return float(int64_t(state >> 33) - (int64_t(1) << 30)) / float(1 << 30);
  };
  for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 1000, 100003}) {
    std::vector<float> v(n);
    long double reference = 0.0L;
    for (auto& x : v) {
      x = next() * 100.0f;
      reference += (long double)x * (long double)x;
    }
    CHECK(pushNorm(dense(v)) == doctest::Approx(double(std::sqrt(reference))).epsilon(1e-12));
  }
}

TEST_CASE("the vectorized sum of squares has the bits of the eight scalar running sums") {
  // laneSumOfSquares keeps laneSum's lanes, each in the same order: the same double exactly, at
  // lengths around the stride and over values from tiny (subnormal floats) to huge.
  uint64_t state = 99;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return float(int64_t(state >> 33) - (int64_t(1) << 30)) / float(1 << 30);
  };
  for (float scale : {1e-40f, 1.0f, 3e18f}) {
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 1000, 100003}) {
      std::vector<float> v(n);
      for (auto& x : v) x = next() * scale;
      const double scalar = laneSum(v, [](float x) { return double(x) * double(x); });
      const double vectorized = laneSumOfSquares(v);
      CHECK(std::memcmp(&scalar, &vectorized, sizeof scalar) == 0);
    }
  }
}

TEST_CASE("a push over the bound is scaled to the bound, by hand") {
  compression::SparseGradient g = dense({3.0f, 4.0f});  // norm 5
  CHECK(pushNorm(g) == 5.0);
  CHECK_FALSE(clipTo(g, 5.0, 5.0));
  CHECK(clipTo(g, 5.0, 2.5));
  CHECK(g.values[0] == doctest::Approx(1.5));
  CHECK(g.values[1] == doctest::Approx(2.0));
  // The lower median of the non-zero norms: 2 of {0, 1, 2, 9}; 2 of {0, 2, 7}; none of {0}.
  CHECK(lowerMedianNonZero({0.0, 9.0, 1.0, 2.0}) == 2.0);
  CHECK(lowerMedianNonZero({0.0, 2.0, 7.0}) == 2.0);
  CHECK_FALSE(lowerMedianNonZero({0.0}).has_value());
}

TEST_CASE("trimmed mean and median agree with brute force over hand-made values") {
  const std::vector<std::vector<float>> cases = {{1.0f},
                                                 {2.0f, -1.0f},
                                                 {5.0f, 1.0f, 3.0f},
                                                 {1e6f, 1.0f, 2.0f, 3.0f, -4.0f},
                                                 {0.5f, 0.5f, -2.0f, 7.0f, 7.0f, 1.0f, 0.0f, 3.0f}};
  for (const auto& v : cases) {
    CHECK(median(v) == doctest::Approx(bruteMedian(v)));
    for (double trim : {0.0, 0.1, 0.2, 0.25, 0.4}) {
      const size_t cut = size_t(std::floor(trim * double(v.size())));
      CHECK(trimmedMean(v, trim) == doctest::Approx(bruteTrimmedMean(v, cut)));
    }
  }
}

TEST_CASE("the robust aggregate takes each coordinate over the pushes that sent it") {
  // dim 3; a dense push, a sparse one with coordinates 0 and 2, a sparse one with coordinate 0.
  const auto a = dense({1.0f, 10.0f, 4.0f});
  const auto b = sparse(3, {0, 2}, {2.0f, 6.0f});
  const auto c = sparse(3, {0}, {900.0f});
  const std::vector<const compression::SparseGradient*> pushes = {&a, &b, &c};
  const auto med = robustAggregate(pushes, 3, config::RobustRule::kMedian, 0.0);
  // Coordinate 0: median{1, 2, 900} = 2, sent by 3 of 3; 1: {10}, 1 of 3; 2: {4, 6} -> 5, 2 of 3.
  CHECK(med[0] == doctest::Approx(bruteMedian({1.0f, 2.0f, 900.0f})));
  CHECK(med[1] == doctest::Approx(10.0 / 3));
  CHECK(med[2] == doctest::Approx(5.0 * 2 / 3));
  // Trimming nothing is the plain mean of the pushes, a coordinate not sent counting as zero.
  const auto mean = robustAggregate(pushes, 3, config::RobustRule::kTrimmedMean, 0.0);
  CHECK(mean[0] == doctest::Approx((1.0 + 2.0 + 900.0) / 3));
  CHECK(mean[1] == doctest::Approx(10.0 / 3));
  CHECK(mean[2] == doctest::Approx((4.0 + 6.0) / 3));
  // A third trimmed from each end of three values: the middle one.
  const auto trimmed = robustAggregate(pushes, 3, config::RobustRule::kTrimmedMean, 0.34);
  CHECK(trimmed[0] == doctest::Approx(2.0));
}

TEST_CASE("a push of 1e6 values claiming 2^40 samples moves the model by a bounded step") {
  // Three honest pushes of norm 1 (100 samples each) and a poisoned one. Its weight is capped at
  // 0.5 and its norm clipped to 10 times the median: the step is at most lr * (0.5 * 10 + 0.5 * 1).
  ml::OptimizerSpec sgd;
  sgd.lr = 0.1;
  const size_t d = 4;
  Aggregator agg(sgd, std::vector<float>(d, 0.0f), 1 << 20);  // the default defences
  Membership m;
  for (uint32_t id = 0; id < 3; ++id) {
    Worker& w = m.all()[id];
    w.rec.id = id;
    w.samples = 100;
    w.pending = dense({0.5f, 0.5f, 0.5f, 0.5f});
  }
  Worker& bad = m.all()[3];
  bad.rec.id = 3;
  bad.samples = uint64_t{1} << 40;
  bad.pending = dense(std::vector<float>(d, 1e6f));
  const StepResult r = agg.step(m, 0);
  CHECK(r.clipped == 1);
  CHECK(m.all()[3].rec.pushes_clipped == 1);
  double moved = 0.0;
  for (float p : agg.parameters()) moved += double(p) * double(p);
  CHECK(std::sqrt(moved) <= 0.1 * (0.5 * 10.0 + 0.5 * 1.0) + 1e-6);
  CHECK(std::sqrt(moved) > 0.0);
}

TEST_CASE("norms taken as the pushes arrive step the model as norms taken at the close do") {
  // The coordinator takes each push's norm when it accepts it; the reference takes none and
  // leaves the step to compute them. Same pushes, same bits.
  ml::OptimizerSpec sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  const size_t d = 64;
  auto fill = [&](Membership& m, const Aggregator* norms_from) {
    for (uint32_t id = 0; id < 5; ++id) {
      Worker& w = m.all()[id];
      w.rec.id = id;
      w.samples = 10 + id;
      std::vector<float> v(d);
      for (size_t j = 0; j < d; ++j) v[j] = float((j * 7 + id * 3) % 11) - 5.0f;
      if (id == 4) v.assign(d, 500.0f);  // clipped
      w.pending = dense(v);
      if (norms_from) w.pending_norm = norms_from->clipNorm(*w.pending);
    }
  };
  Aggregator early(sgd, std::vector<float>(d, 0.0f), 1 << 20);
  Aggregator late(sgd, std::vector<float>(d, 0.0f), 1 << 20);
  for (uint64_t round = 0; round < 3; ++round) {
    Membership a, b;
    fill(a, &early);
    REQUIRE(a.all()[4].pending_norm.has_value());
    CHECK(*a.all()[4].pending_norm == doctest::Approx(500.0 * std::sqrt(double(d))));
    fill(b, nullptr);
    const StepResult ra = early.step(a, round);
    const StepResult rb = late.step(b, round);
    CHECK(ra.clipped == 1);
    CHECK(rb.clipped == 1);
    CHECK(early.parameters() == late.parameters());
    CHECK_FALSE(a.all()[4].pending_norm.has_value());  // let go with the push
  }
  config::AggregationSettings no_clip;
  no_clip.clip_multiple = 0.0;
  Aggregator plain(sgd, std::vector<float>(d, 0.0f), 1 << 20, no_clip);
  CHECK_FALSE(plain.clipNorm(dense(std::vector<float>(d, 1.0f))).has_value());
}
