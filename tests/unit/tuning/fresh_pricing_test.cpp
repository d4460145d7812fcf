// cat with error feedback prices every level on the fresh gradient g and sends from g + e;
// cat-paper prices on g + e. Each is checked against a scan of every level recomputed here from
// the sorted squares, not through the tuning library's profile or search.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/tuning/tuner.hpp"
#include "random_vectors.hpp"

using namespace tern;
using namespace tern::tuning;
using tern::tuning::testing::randomVector;
using tern::tuning::testing::Shape;

namespace {

std::unique_ptr<compression::Compressor> topK() {
  compression::CompressorSpec spec;
  spec.name = "topk";
  return compression::makeCompressor(spec);
}

std::unique_ptr<Tuner> tunerOf(TunerKind kind, double L) {
  TunerSpec spec;
  spec.kind = kind;
  spec.smoothness = L;
  return makeTuner(spec);
}

struct Best {
  uint32_t level = 0;
  double improvement = 0.0;
};

// argmax over T in [1, m] of the top-T bound of `priced` at step eta (the paper's 1/L when eta
// is 0) over the push's cost; ties to the smaller T.
Best bruteForce(const std::vector<float>& priced, uint32_t m, double L, double eta,
                const compression::Compressor& comp, const costmodel::CostModel& cost) {
  std::vector<double> squares;
  for (float x : priced) squares.push_back(double(x) * x);
  std::sort(squares.begin(), squares.end(), std::greater<>());
  Best best;
  double best_ratio = -1.0, s2 = 0.0;
  for (uint32_t T = 1; T <= m; ++T) {
    s2 += squares[T - 1];
    const double gain = eta == 0.0 ? s2 / (2.0 * L) : eta * (1.0 - L * eta / 2.0) * s2;
    const double ratio = gain / cost.cost(comp.encodedBytes(uint32_t(priced.size()), T));
    if (ratio > best_ratio) best_ratio = ratio, best = {T, gain};
  }
  return best;
}

std::vector<float> sum(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> s(a.size());
  for (size_t i = 0; i < a.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

}  // namespace

TEST_CASE("cat's level is the brute-force argmax of the fresh gradient's bound per cost") {
  Rng rng(41);
  auto comp = topK();
  const costmodel::PayloadCostModel payload(66);
  const costmodel::PacketCostModel packet(1.0, 0.4, 64, 20);  // a few levels per packet
  const double L = 0.7;
  for (const Shape shape : {Shape::kGaussian, Shape::kHeavyTailed, Shape::kMostlyZero}) {
    for (const costmodel::CostModel* cost : {static_cast<const costmodel::CostModel*>(&payload),
                                             static_cast<const costmodel::CostModel*>(&packet)}) {
      for (const double eta : {0.0, 0.5}) {
        const std::vector<float> g = randomVector(60, shape, rng);
        const std::vector<float> v = sum(g, randomVector(60, Shape::kGaussian, rng));
        for (const uint32_t cap : {0u, 7u}) {
          const uint32_t m = cap == 0 ? 60 : cap;
          const TuningDecision d =
              tunerOf(TunerKind::kCat, L)->choose(v, cap, *comp, *cost, -1.0, 0.0, eta, g);
          const Best fresh = bruteForce(g, m, L, eta, *comp, *cost);
          CAPTURE(testing::shapeName(shape));
          CAPTURE(cost->name());
          CAPTURE(eta);
          CAPTURE(cap);
          CHECK(d.level == fresh.level);
          CHECK(d.predicted_improvement == doctest::Approx(fresh.improvement));
          // The paper's criterion prices what is sent from: g + e.
          const TuningDecision paper =
              tunerOf(TunerKind::kCatPaper, L)->choose(v, cap, *comp, *cost, -1.0, 0.0, eta, g);
          CHECK(paper.level == bruteForce(v, m, L, eta, *comp, *cost).level);
        }
      }
    }
  }
}

TEST_CASE("cat without a fresh gradient is the paper's criterion on the vector it is given") {
  Rng rng(43);
  auto comp = topK();
  const costmodel::PayloadCostModel payload(66);
  const std::vector<float> v = randomVector(80, Shape::kHeavyTailed, rng);
  const TuningDecision d = tunerOf(TunerKind::kCat, 1.0)->choose(v, 0, *comp, payload);
  CHECK(d.level == bruteForce(v, 80, 1.0, 0.0, *comp, payload).level);
  CHECK(d.level == tunerOf(TunerKind::kCatPaper, 1.0)->choose(v, 0, *comp, payload).level);
}

TEST_CASE("a flat residual under a spiky gradient makes the paper's criterion send more, not cat") {
  // g: three large entries; e: what earlier pushes left, a hundred entries of one size (each
  // worth more than its bytes at the spikes' ratio). The paper's criterion on g + e counts e as
  // lost unless sent now and sends all of it.
  std::vector<float> g(200, 0.01f), e(200, 0.0f);
  g[3] = 5.0f, g[50] = -4.0f, g[120] = 3.0f;
  for (size_t i = 0; i < e.size(); i += 2) e[i] = (i % 4 == 0 ? 1.0f : -1.0f) * 3.0f;
  const std::vector<float> v = sum(g, e);
  auto comp = topK();
  const costmodel::PayloadCostModel payload(66);
  const TuningDecision fresh =
      tunerOf(TunerKind::kCat, 1.0)->choose(v, 0, *comp, payload, -1.0, 0.0, 0.0, g);
  const TuningDecision paper =
      tunerOf(TunerKind::kCatPaper, 1.0)->choose(v, 0, *comp, payload, -1.0, 0.0, 0.0, g);
  CHECK(fresh.level == bruteForce(g, 200, 1.0, 0.0, *comp, payload).level);
  CHECK(fresh.level <= 3);
  CHECK(paper.level >= 100);
}

TEST_CASE("cat refuses a fresh gradient whose size differs from the vector's") {
  auto comp = topK();
  const costmodel::PayloadCostModel payload;
  const std::vector<float> v(10, 1.0f), g(9, 1.0f);
  CHECK_THROWS_AS(tunerOf(TunerKind::kCat, 1.0)->choose(v, 0, *comp, payload, -1.0, 0.0, 0.0, g),
                  std::invalid_argument);
}
