#include "common/tuning/tuner.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/tuning/improvement.hpp"
#include "common/tuning/magnitude_profile.hpp"
#include "common/tuning/selection.hpp"
#include "random_vectors.hpp"

using namespace tern;
using namespace tern::tuning;
using tern::tuning::testing::randomVector;
using tern::tuning::testing::Shape;

namespace {

std::unique_ptr<compression::Compressor> compressorNamed(const std::string& name) {
  compression::CompressorSpec spec;
  spec.name = name;
  return compression::makeCompressor(spec);
}

std::unique_ptr<Tuner> tunerNamed(const std::string& name, uint32_t fixed_level = 0,
                                  uint32_t recompute_every = 1, double L = 1.0,
                                  double drift = 0.0) {
  TunerSpec spec;
  const auto kind = tunerKindNamed(name);
  REQUIRE(kind.has_value());
  spec.kind = *kind;
  spec.fixed_level = fixed_level;
  spec.recompute_every = recompute_every;
  spec.recompute_drift = drift;
  spec.smoothness = L;
  return makeTuner(spec);
}

const std::vector<float> kPoloVector = {-5, 1, 12, -7, 0, 0, -100, 500, 6, -30};

}  // namespace

TEST_CASE("the dynamic rule keeps only the entries at 6 and 7 of POLO's test vector") {
  const MagnitudeProfile p(kPoloVector, kPoloVector.size());
  CHECK(dynamicMaxLevel(kPoloVector.size()) == 4);
  CHECK(dynamicLevel(p, 4) == 2);

  auto sq = compressorNamed("sq");
  const costmodel::PayloadCostModel payload;
  const TuningDecision d = tunerNamed("dynamic")->choose(kPoloVector, 0, *sq, payload);
  REQUIRE(d.level == 2);
  Rng rng(1);
  const auto sent = sq->compress(kPoloVector, d.level, rng).decoded;
  CHECK(sent.indices == std::vector<uint32_t>{6, 7});
  CHECK(sent.values[0] < 0);
  CHECK(sent.values[1] > 0);
}

TEST_CASE("the dynamic rule stops at ceil(sqrt(d)) when the largest entries never reach the norm") {
  const std::vector<float> flat(100, 1.0f);  // S1(T) = T, ||g|| = 10: T = 10 = sqrt(100)
  const MagnitudeProfile p(flat, 10);
  CHECK(dynamicLevel(p, 10) == 10);
  const std::vector<float> flat2(101, 1.0f);  // ||g|| = sqrt(101) > 10, bound ceil(sqrt 101) = 11
  CHECK(dynamicMaxLevel(101) == 11);
  CHECK(dynamicLevel(MagnitudeProfile(flat2, 11), 11) == 11);
  CHECK(dynamicMaxLevel(1) == 1);
  CHECK(dynamicMaxLevel(2) == 2);
}

TEST_CASE("cat chooses the brute-force T* and reports its cost, improvement and step") {
  Rng rng(23);
  const costmodel::PacketCostModel packet = costmodel::packetModelOfLink(5e-3, 8e6);
  for (const std::string name : {"topk", "sq", "stochastic"}) {
    auto comp = compressorNamed(name);
    const std::vector<float> v = randomVector(3000, Shape::kHeavyTailed, rng);
    const double L = 0.3;
    const TuningDecision d = tunerNamed("cat", 0, 1, L)->choose(v, 0, *comp, packet);
    MagnitudeProfile p(v, v.size());
    const Scheme scheme = *schemeOf(name);
    const Selection brute = selectLevelBruteForce(scheme, p, L, 3000, *comp, packet);
    CAPTURE(name);
    CHECK(d.level == brute.level);
    CHECK(d.predicted_cost == packet.cost(comp->encodedBytes(3000, d.level)));
    CHECK(d.predicted_improvement == doctest::Approx(improvement(scheme, p, d.level, L)));
    CHECK(d.step == doctest::Approx(step(scheme, p, d.level, L)));
    CHECK(d.recomputed);
  }
}

TEST_CASE("every tuner respects the coordinator's cap") {
  Rng rng(29);
  const costmodel::PacketCostModel heavy_fixed(100.0, 1e-3, 1448);  // wants T as large as allowed
  for (const std::string comp_name : {"topk", "sq", "stochastic", "identity"}) {
    auto comp = compressorNamed(comp_name);
    for (const std::string tuner_name : {"cat", "cat-paper", "fixed", "dynamic", "full"}) {
      auto tuner = tunerNamed(tuner_name, 5000);
      for (const uint32_t cap : {1u, 7u, 150u, 999u}) {
        const std::vector<float> v = randomVector(1000, Shape::kGaussian, rng);
        const TuningDecision d = tuner->choose(v, cap, *comp, heavy_fixed);
        CAPTURE(comp_name);
        CAPTURE(tuner_name);
        CAPTURE(cap);
        CHECK(d.level >= 1);
        CHECK(d.level <= cap);
      }
    }
  }
}

TEST_CASE("cat under a cap equals the brute-force argmax over [1, cap]") {
  Rng rng(31);
  const costmodel::PayloadCostModel payload(66);
  auto comp = compressorNamed("topk");
  const std::vector<float> v = randomVector(2000, Shape::kHeavyTailed, rng);
  MagnitudeProfile p(v, v.size());
  for (const uint32_t cap : {1u, 2u, 10u, 300u}) {
    const TuningDecision d = tunerNamed("cat")->choose(v, cap, *comp, payload);
    CHECK(d.level == selectLevelBruteForce(Scheme::kTopT, p, 1.0, cap, *comp, payload).level);
  }
}

TEST_CASE("the hybrid heuristic reuses T* between recomputes and recomputes every S calls") {
  Rng rng(37);
  auto comp = compressorNamed("topk");
  const costmodel::PacketCostModel packet = costmodel::packetModelOfLink(5e-3, 8e6);
  // Two vectors whose own T* differ: one spike (T* small) and a flat one (T* fills packets).
  std::vector<float> spike(5000, 1e-4f);
  spike[42] = 10.0f;
  const std::vector<float> flat = randomVector(5000, Shape::kTies, rng);
  auto solo = tunerNamed("cat");
  const uint32_t t_spike = solo->choose(spike, 0, *comp, packet).level;
  const uint32_t t_flat = solo->choose(flat, 0, *comp, packet).level;
  REQUIRE(t_spike != t_flat);

  auto hybrid = tunerNamed("cat", 0, 3);
  const TuningDecision first = hybrid->choose(spike, 0, *comp, packet);
  CHECK(first.recomputed);
  CHECK(first.level == t_spike);
  for (int i = 0; i < 2; ++i) {
    const TuningDecision reused = hybrid->choose(flat, 0, *comp, packet);
    CHECK_FALSE(reused.recomputed);
    CHECK(reused.level == t_spike);
    CHECK(reused.predicted_cost == packet.cost(comp->encodedBytes(5000, t_spike)));
  }
  const TuningDecision fourth = hybrid->choose(flat, 0, *comp, packet);
  CHECK(fourth.recomputed);
  CHECK(fourth.level == t_flat);
}

TEST_CASE("with a drift factor the hybrid recomputes early once the vector's shape moves") {
  Rng rng(38);
  // Top-T: under a payload cost S+Q follows its vector between recomputes (test below), top-T
  // keeps T*.
  auto comp = compressorNamed("topk");
  const costmodel::PayloadCostModel payload(66);
  const std::vector<float> flat = randomVector(5000, Shape::kGaussian, rng);
  std::vector<float> spiky = flat;
  for (size_t j = 0; j < 5000; j += 100) spiky[j] *= 200.0f;  // 50 coordinates dominate
  auto norms = [](const std::vector<float>& v) {
    double l1 = 0, l2 = 0;
    for (float x : v) {
      l1 += std::fabs(x);
      l2 += double(x) * x;
    }
    return l1 * l1 / l2;
  };
  REQUIRE(norms(spiky) * 1.25 < norms(flat));  // far apart in effective sparsity

  auto hybrid = tunerNamed("cat", 0, 200, 1.0, 1.25);
  const TuningDecision first = hybrid->choose(flat, 0, *comp, payload);
  CHECK(first.recomputed);
  // The same shape at another scale keeps T*: ||v||_1^2 / ||v||_2^2 does not see the scale.
  std::vector<float> scaled = flat;
  for (float& x : scaled) x *= 3.0f;
  const TuningDecision same = hybrid->choose(scaled, 0, *comp, payload);
  CHECK_FALSE(same.recomputed);
  CHECK(same.level == first.level);
  // A different shape forces the search long before 200 calls, with the answer a fresh
  // tuner gives.
  const TuningDecision moved = hybrid->choose(spiky, 0, *comp, payload);
  CHECK(moved.recomputed);
  CHECK(moved.level == tunerNamed("cat")->choose(spiky, 0, *comp, payload).level);
  CHECK(moved.level != first.level);
  // Without the factor (0) the plain hybrid keeps the stale T*.
  auto plain = tunerNamed("cat", 0, 200, 1.0, 0.0);
  plain->choose(flat, 0, *comp, payload);
  CHECK_FALSE(plain->choose(spiky, 0, *comp, payload).recomputed);
  TunerSpec bad;
  bad.recompute_drift = 0.9;
  CHECK_THROWS_AS(makeTuner(bad), std::invalid_argument);
}

TEST_CASE("between recomputes, S+Q takes the best magnitude bin, near the full search") {
  // Reference: every T in [1, cap] scanned over an independently sorted copy of |w|. The bins
  // are an eighth of an octave wide; the best bin boundary, packet-filling level or cap is
  // within 2% of T*'s ratio on these shapes under the payload model and under packet models
  // whose cost steps within the range of levels (200-byte packets: about 150 levels each),
  // with and without a cap.
  Rng rng(39);
  auto comp = compressorNamed("sq");
  const costmodel::PayloadCostModel payload(66);
  const costmodel::PacketCostModel packet(5e-3, 1.5e-3, 200);
  const costmodel::PacketCostModel mtu(5e-3, 1.5e-3, 1448);
  const costmodel::PacketCostModel with_envelope(5e-3, 1.5e-3, 200, 124);
  const double L = 2.0;
  const size_t d = 5000;
  REQUIRE(packet.cost(comp->encodedBytes(uint32_t(d), 4000)) >
          packet.cost(comp->encodedBytes(uint32_t(d), 40)));
  for (const costmodel::CostModel* cost : std::initializer_list<const costmodel::CostModel*>{
           &payload, &packet, &mtu, &with_envelope}) {
    double worst = 1.0;
    for (uint32_t cap : {0u, 50u, 1000u}) {
      for (Shape shape :
           {Shape::kGaussian, Shape::kHeavyTailed, Shape::kMostlyZero, Shape::kTies}) {
        CAPTURE(cost->name());
        CAPTURE(cap);
        CAPTURE(shapeName(shape));
        const uint32_t limit = cap == 0 ? uint32_t(d) : cap;
        auto hybrid = tunerNamed("cat", 0, 200, L, 0.0);
        REQUIRE(hybrid->choose(randomVector(d, shape, rng), cap, *comp, *cost).recomputed);
        for (int draw = 0; draw < 3; ++draw) {
          const std::vector<float> w = randomVector(d, shape, rng);
          const TuningDecision got = hybrid->choose(w, cap, *comp, *cost);
          CHECK_FALSE(got.recomputed);
          REQUIRE(got.level >= 1);
          REQUIRE(got.level <= limit);
          std::vector<double> mags;
          for (float x : w) mags.push_back(std::fabs(double(x)));
          std::sort(mags.begin(), mags.end(), std::greater<>());
          double s1 = 0.0, best_ratio = 0.0, s1_at_level = 0.0;
          for (size_t T = 1; T <= limit; ++T) {
            s1 += mags[T - 1];
            const double imp = s1 * s1 / (2.0 * L * double(T));
            const double c = cost->cost(comp->encodedBytes(uint32_t(d), uint32_t(T)));
            best_ratio = std::max(best_ratio, imp / c);
            if (T == got.level) s1_at_level = s1;
          }
          // What it keeps is exactly the top `level` magnitudes: its improvement is theirs.
          CHECK(got.predicted_improvement ==
                doctest::Approx(s1_at_level * s1_at_level / (2.0 * L * got.level)).epsilon(1e-9));
          CHECK(got.predicted_cost == cost->cost(comp->encodedBytes(uint32_t(d), got.level)));
          CHECK(got.step == doctest::Approx(1.0 / L));
          const double ratio = got.predicted_improvement / got.predicted_cost;
          CHECK(ratio <= best_ratio * (1.0 + 1e-9));
          CHECK(ratio >= 0.98 * best_ratio);
          worst = std::min(worst, ratio / best_ratio);
        }
      }
    }
    MESSAGE(cost->name() << ": worst binned ratio / full search's: " << worst);
  }
  // Nothing finite and nonzero: the hybrid falls back to a full search.
  auto hybrid = tunerNamed("cat", 0, 200, L, 0.0);
  hybrid->choose(randomVector(d, Shape::kGaussian, rng), 0, *comp, payload);
  const std::vector<float> zeros(d, 0.0f);
  CHECK(hybrid->choose(zeros, 0, *comp, payload).recomputed);
  // With the drift check on, a vector whose effective sparsity moved recomputes at once.
  auto drifting = tunerNamed("cat", 0, 200, L, 1.25);
  REQUIRE(drifting->choose(randomVector(d, Shape::kGaussian, rng), 0, *comp, packet).recomputed);
  CHECK_FALSE(
      drifting->choose(randomVector(d, Shape::kGaussian, rng), 0, *comp, packet).recomputed);
  CHECK(drifting->choose(randomVector(d, Shape::kMostlyZero, rng), 0, *comp, packet).recomputed);
}

TEST_CASE("a full search counts NaN and infinite entries as zero, for every compressor") {
  // Before, an infinity made ||v||^2 infinite and the search threw (the worker then sent its
  // whole cap), where the binned S+Q path between recomputes took it as zero.
  Rng rng(59);
  const costmodel::PayloadCostModel payload(66);
  const costmodel::PacketCostModel packet(5e-3, 1.5e-3, 200);
  const float inf = std::numeric_limits<float>::infinity();
  const size_t d = 501;
  std::vector<float> bad = randomVector(d, Shape::kHeavyTailed, rng);
  bad[3] = inf;
  bad[8] = -inf;
  bad[20] = std::nanf("");
  std::vector<float> clean = bad;
  for (float& x : clean)
    if (!std::isfinite(x)) x = 0.0f;
  for (const std::string name : {"topk", "sq", "stochastic"}) {
    auto comp = compressorNamed(name);
    for (const costmodel::CostModel* cost : {static_cast<const costmodel::CostModel*>(&payload),
                                             static_cast<const costmodel::CostModel*>(&packet)}) {
      CAPTURE(name);
      CAPTURE(cost->name());
      auto a = tunerNamed("cat", 0, 1, 1.5);
      auto b = tunerNamed("cat", 0, 1, 1.5);
      const TuningDecision got = a->choose(bad, 0, *comp, *cost);
      const TuningDecision ref = b->choose(clean, 0, *comp, *cost);
      CHECK(got.level == ref.level);
      CHECK(got.predicted_improvement == doctest::Approx(ref.predicted_improvement));
    }
  }
}

TEST_CASE("between recomputes, S+Q's bins count NaN and infinite entries as zero") {
  // The bins come from one pass over the vector in two lanes (even and odd coordinates) plus a
  // tail: an odd length, NaN and infinities in both lanes, a subnormal and an exact zero must
  // give the choice the same vector makes with those entries set to zero.
  Rng rng(53);
  auto comp = compressorNamed("sq");
  const costmodel::PayloadCostModel payload(66);
  const costmodel::PacketCostModel packet(5e-3, 1.5e-3, 200);
  const double L = 1.5;
  const size_t d = 2001;
  const float inf = std::numeric_limits<float>::infinity();
  // Without a cap the level is a bin boundary; a cap that cuts a bin (37 on the Gaussian
  // vector) makes the search evaluate a level inside the bin, from magnitudes it gathers from
  // the vector a second time.
  for (const Shape shape : {Shape::kHeavyTailed, Shape::kGaussian}) {
    const std::vector<float> v = randomVector(d, shape, rng);
    std::vector<float> bad = randomVector(d, shape, rng);
    for (const size_t j : {size_t{0}, size_t{7}, size_t{d - 1}}) bad[j] = std::nanf("");
    for (const size_t j : {size_t{2}, size_t{9}}) bad[j] = (j % 2 == 0 ? inf : -inf);
    bad[11] = 0.0f;
    bad[12] = -std::numeric_limits<float>::denorm_min();
    std::vector<float> clean = bad;
    for (float& x : clean)
      if (!std::isfinite(x)) x = 0.0f;
    std::vector<double> mags;
    for (float x : clean) mags.push_back(std::fabs(double(x)));
    std::sort(mags.begin(), mags.end(), std::greater<>());
    const std::initializer_list<std::pair<const costmodel::CostModel*, uint32_t>> cases = {
        {&payload, 0u}, {&packet, 0u}, {&payload, 37u}, {&packet, 37u}};
    for (const auto& [cost, cap] : cases) {
      CAPTURE(shapeName(shape));
      CAPTURE(cost->name());
      CAPTURE(cap);
      auto a = tunerNamed("cat", 0, 200, L, 0.0);
      auto b = tunerNamed("cat", 0, 200, L, 0.0);
      REQUIRE(a->choose(v, cap, *comp, *cost).recomputed);
      REQUIRE(b->choose(v, cap, *comp, *cost).recomputed);
      const TuningDecision got = a->choose(bad, cap, *comp, *cost);
      const TuningDecision ref = b->choose(clean, cap, *comp, *cost);
      REQUIRE_FALSE(got.recomputed);
      REQUIRE_FALSE(ref.recomputed);
      CHECK(got.level == ref.level);
      CHECK(got.predicted_improvement == doctest::Approx(ref.predicted_improvement).epsilon(1e-12));
      // And the improvement is the top `level` magnitudes' S1^2 / (2 L T), from a sorted copy.
      double s1 = 0.0;
      for (uint32_t k = 0; k < got.level; ++k) s1 += mags[k];
      CHECK(got.predicted_improvement == doctest::Approx(s1 * s1 / (2.0 * L * got.level)));
      if (cap > 0) CHECK(got.level <= cap);
    }
  }
}

TEST_CASE("the hybrid heuristic recomputes at once when the cap changes") {
  Rng rng(41);
  auto comp = compressorNamed("topk");
  const costmodel::PacketCostModel heavy_fixed(100.0, 1e-3, 1448);
  const std::vector<float> v = randomVector(4000, Shape::kGaussian, rng);
  auto hybrid = tunerNamed("cat", 0, 200);
  const TuningDecision a = hybrid->choose(v, 0, *comp, heavy_fixed);
  REQUIRE(a.level > 10);
  const TuningDecision b = hybrid->choose(v, 10, *comp, heavy_fixed);
  CHECK(b.recomputed);
  CHECK(b.level <= 10);
}

TEST_CASE("a reused stochastic level still gets the step of the current vector") {
  Rng rng(43);
  auto comp = compressorNamed("stochastic");
  const costmodel::PayloadCostModel payload(66);
  auto hybrid = tunerNamed("cat", 0, 5, 2.0);
  const std::vector<float> first = randomVector(1000, Shape::kGaussian, rng);
  const std::vector<float> second = randomVector(1000, Shape::kHeavyTailed, rng);
  const TuningDecision a = hybrid->choose(first, 0, *comp, payload);
  const TuningDecision b = hybrid->choose(second, 0, *comp, payload);
  REQUIRE_FALSE(b.recomputed);
  REQUIRE(b.level == a.level);
  const MagnitudeProfile p(second, second.size());
  CHECK(b.step == doctest::Approx(stochasticStep(p, b.level, 2.0)).epsilon(1e-9));
  CHECK(b.predicted_improvement ==
        doctest::Approx(stochasticImprovement(p, b.level, 2.0)).epsilon(1e-9));
}

TEST_CASE(
    "fixed and full report S+Q's improvement over the signs sent when T passes the non-zeros") {
  // Ten non-zeros of 200: S+Q at T = 50 or T = d sends those ten signs with scale S1 / 10, and
  // decreases f by S1^2 / (2 L 10) at step 1/L (written out here from the definition).
  auto comp = compressorNamed("sq");
  const costmodel::PayloadCostModel payload;
  std::vector<float> v(200, 0.0f);
  double s1 = 0.0;
  for (size_t j = 3; j < v.size(); j += 20) {
    v[j] = (j % 40 == 3 ? -1.0f : 1.0f) * float(1 + j) / 50.0f;
    s1 += std::fabs(double(v[j]));
  }
  const double L = 1.5;
  const double expected = s1 * s1 / (2.0 * L * 10.0);
  for (const std::string name : {"fixed", "full"}) {
    CAPTURE(name);
    const TuningDecision d = tunerNamed(name, 50, 1, L)->choose(v, 0, *comp, payload);
    CHECK(d.predicted_improvement == doctest::Approx(expected).epsilon(1e-9));
  }
}

TEST_CASE("the hybrid recomputes T* when the cost model's shape moves, not when its scale does") {
  // A worker's measured link model replaces the configured constants once fitted: the hybrid
  // must not keep the T* of the old model for S pushes.
  Rng rng(53);
  auto comp = compressorNamed("topk");
  const std::vector<float> v = randomVector(20000, Shape::kHeavyTailed, rng);
  const costmodel::PacketCostModel configured(5e-3, 1.5e-3);
  const costmodel::PacketCostModel fitted(0.2, 1e-4);    // fixed cost dominates: send more
  const costmodel::PacketCostModel scaled(10e-3, 3e-3);  // the same shape, twice the seconds
  auto fresh = [&](const costmodel::CostModel& c) {
    return tunerNamed("cat", 0, 1, 1.0)->choose(v, 0, *comp, c).level;
  };
  REQUIRE(fresh(fitted) > 2 * fresh(configured));
  auto hybrid = tunerNamed("cat", 0, 200, 1.0, 1.25);
  const TuningDecision first = hybrid->choose(v, 0, *comp, configured);
  CHECK(first.level == fresh(configured));
  const TuningDecision same_shape = hybrid->choose(v, 0, *comp, scaled);
  CHECK_FALSE(same_shape.recomputed);
  CHECK(same_shape.level == first.level);
  const TuningDecision moved = hybrid->choose(v, 0, *comp, fitted);
  CHECK(moved.recomputed);
  CHECK(moved.level == fresh(fitted));
}

TEST_CASE("fixed uses its level clamped to the cap, or the cap when its level is zero") {
  Rng rng(47);
  auto comp = compressorNamed("topk");
  const costmodel::PayloadCostModel payload;
  const std::vector<float> v = randomVector(500, Shape::kGaussian, rng);
  CHECK(tunerNamed("fixed", 20)->choose(v, 0, *comp, payload).level == 20);
  CHECK(tunerNamed("fixed", 20)->choose(v, 8, *comp, payload).level == 8);
  CHECK(tunerNamed("fixed", 0)->choose(v, 33, *comp, payload).level == 33);
  CHECK(tunerNamed("fixed", 0)->choose(v, 0, *comp, payload).level == 500);
  const TuningDecision d = tunerNamed("fixed", 20, 1, 4.0)->choose(v, 0, *comp, payload);
  CHECK(d.predicted_improvement ==
        doctest::Approx(topTImprovement(MagnitudeProfile(v, 20), 20, 4.0)));
  CHECK(d.step == doctest::Approx(0.25));
}

TEST_CASE("full sends every coordinate and predicts the full gradient step's decrease") {
  Rng rng(53);
  const costmodel::PayloadCostModel payload;
  const std::vector<float> v = randomVector(700, Shape::kGaussian, rng);
  double norm2 = 0.0;
  for (float x : v) norm2 += double(x) * x;
  for (const std::string name : {"topk", "identity", "stochastic"}) {
    auto comp = compressorNamed(name);
    const TuningDecision d = tunerNamed("full", 0, 1, 2.0)->choose(v, 0, *comp, payload);
    CAPTURE(name);
    CHECK(d.level == 700);
    CHECK(d.predicted_improvement == doctest::Approx(norm2 / 4.0));
    CHECK(d.step == doctest::Approx(0.5));
    CHECK(d.predicted_cost == payload.cost(comp->encodedBytes(700, 700)));
  }
  auto topk = compressorNamed("topk");
  CHECK(tunerNamed("full")->choose(v, 99, *topk, payload).level == 99);
}

TEST_CASE("a compressor without a level is credited the squared norm of the finite values only") {
  Rng rng(61);
  const costmodel::PayloadCostModel payload;
  auto identity = compressorNamed("identity");
  std::vector<float> v = randomVector(1001, Shape::kGaussian, rng);
  auto finiteNorm2 = [&v] {
    double n = 0.0;
    for (float x : v)
      if (std::isfinite(x)) n += double(x) * x;
    return n;
  };
  auto credited = [&] {
    return tunerNamed("fixed", 0, 1, 2.0)->choose(v, 0, *identity, payload).predicted_improvement;
  };
  const double all_finite = credited();
  CHECK(all_finite == doctest::Approx(finiteNorm2() / 4.0).epsilon(1e-12));
  v[3] = std::numeric_limits<float>::quiet_NaN();
  v[998] = -std::numeric_limits<float>::infinity();
  CHECK(std::isfinite(credited()));
  CHECK(credited() == doctest::Approx(finiteNorm2() / 4.0).epsilon(1e-12));
  CHECK(credited() < all_finite);
}

TEST_CASE("cat leaves compressors without a level at the whole vector") {
  Rng rng(59);
  auto identity = compressorNamed("identity");
  const costmodel::PayloadCostModel payload;
  const std::vector<float> v = randomVector(300, Shape::kGaussian, rng);
  CHECK(tunerNamed("cat")->choose(v, 0, *identity, payload).level == 300);
}

TEST_CASE("unknown tuner names have no kind and makeTuner rejects unusable parameters") {
  CHECK_FALSE(tunerKindNamed("greedy").has_value());
  CHECK_THROWS_AS(tunerNamed("cat", 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(tunerNamed("cat", 0, 1, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(tunerNamed("fixed", 0, 1, -1.0), std::invalid_argument);
  for (const auto& name : tunerNames()) {
    CHECK_NOTHROW(tunerNamed(name));
    CHECK(tunerKindName(*tunerKindNamed(name)) == name);
  }
  auto topk = compressorNamed("topk");
  const costmodel::PayloadCostModel payload;
  CHECK_THROWS_AS(tunerNamed("cat")->choose({}, 0, *topk, payload), std::invalid_argument);
}

TEST_CASE("cat credits no level with more than the gradient step's decrease ||g||^2 / 2L") {
  Rng rng(41);
  const costmodel::PayloadCostModel payload(66);
  auto comp = compressorNamed("topk");
  const double L = 0.5;
  // v = g + e: a residual that piled up on a few coordinates while g itself is spread.
  std::vector<float> g = randomVector(2000, Shape::kGaussian, rng);
  std::vector<float> v = g;
  for (size_t j = 0; j < 40; ++j) v[j * 50] += 30.0f;
  double g_sq = 0.0;
  for (float x : g) g_sq += double(x) * x;
  const TuningDecision capped = tunerNamed("cat", 0, 1, L)->choose(v, 0, *comp, payload, g_sq);
  const TuningDecision open = tunerNamed("cat", 0, 1, L)->choose(v, 0, *comp, payload);
  // The capped choice is the argmax of min(S2(T) / 2L, ||g||^2 / 2L) / C(T), scanned here.
  MagnitudeProfile p(v, v.size());
  uint32_t best = 0;
  double best_ratio = -1.0;
  for (uint32_t T = 1; T <= 2000; ++T) {
    const double r =
        std::min(p.s2(T) / (2 * L), g_sq / (2 * L)) / payload.cost(comp->encodedBytes(2000, T));
    if (r > best_ratio) {
      best_ratio = r;
      best = T;
    }
  }
  CHECK(capped.level == best);
  CHECK(capped.predicted_improvement <= g_sq / (2 * L) * (1 + 1e-12));
  CHECK(capped.level < open.level);  // the residual's mass no longer pays for more levels
  // Without a residual (v = g) the limit never binds: the same level as the paper's CAT.
  const TuningDecision plain = tunerNamed("cat", 0, 1, L)->choose(g, 0, *comp, payload, g_sq);
  const TuningDecision paper = tunerNamed("cat", 0, 1, L)->choose(g, 0, *comp, payload);
  CHECK(plain.level == paper.level);
  CHECK(plain.predicted_improvement == paper.predicted_improvement);
}

TEST_CASE("fixed and full report the improvement and step of the sorted profile at their level") {
  Rng rng(47);
  const costmodel::PacketCostModel packet = costmodel::packetModelOfLink(5e-3, 8e6);
  for (const std::string name : {"topk", "sq", "stochastic"}) {
    auto comp = compressorNamed(name);
    const Scheme scheme = *schemeOf(name);
    for (const auto shape :
         {Shape::kGaussian, Shape::kHeavyTailed, Shape::kMostlyZero, Shape::kTies}) {
      std::vector<float> v = randomVector(3001, shape, rng);
      v[17] = std::nanf("");  // counted as zero by every path
      for (const uint32_t level : {1u, 7u, 300u, 3000u}) {
        const double L = 0.7;
        const TuningDecision d = tunerNamed("fixed", level, 1, L)->choose(v, 0, *comp, packet);
        MagnitudeProfile p(v, level);
        CAPTURE(name);
        CAPTURE(level);
        CHECK(d.level == level);
        CHECK(d.predicted_improvement ==
              doctest::Approx(improvement(scheme, p, level, L)).epsilon(1e-12));
        CHECK(d.step == doctest::Approx(step(scheme, p, level, L)).epsilon(1e-12));
        CHECK(d.predicted_cost == packet.cost(comp->encodedBytes(3001, level)));
        // full under a cap of `level` decides the same.
        const TuningDecision f = tunerNamed("full", 0, 1, L)->choose(v, level, *comp, packet);
        CHECK(f.level == level);
        CHECK(f.predicted_improvement == doctest::Approx(d.predicted_improvement).epsilon(1e-12));
        CHECK(f.step == doctest::Approx(d.step).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("with shifts, cat's improvement is the expected decrease of the shifted step") {
  // On f(x) = (L/2)||x||^2 the descent lemma is an equality, so the decrease of one step can be
  // measured: at x the gradient is g = L x; a shift h is known to both sides, the worker sends
  // the stochastic sparsification Q of v = g - h, and the receiver steps by h/L + step * Q(v).
  // cat, given the base (||g||^2 - ||v||^2)/(2L), must predict the mean decrease over draws.
  const double L = 2.5;
  const size_t d = 3000;
  Rng rng(77);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(d), h(d), g(d), v(d);
  for (size_t j = 0; j < d; ++j) {
    x[j] = normal(rng) * (j < 100 ? 3.0f : 0.3f);
    g[j] = static_cast<float>(L) * x[j];
    h[j] = 0.4f * g[j] + 0.2f * normal(rng) * std::abs(g[j]);  // a shift part of the way to g
    v[j] = g[j] - h[j];
  }
  auto f = [&](const std::vector<float>& y) {
    double s = 0.0;
    for (float e : y) s += double(e) * e;
    return L / 2.0 * s;
  };
  double g_sq = 0.0, v_sq = 0.0;
  for (size_t j = 0; j < d; ++j) {
    g_sq += double(g[j]) * g[j];
    v_sq += double(v[j]) * v[j];
  }
  const double base = (g_sq - v_sq) / (2.0 * L);
  REQUIRE(base > 0.0);
  auto comp = compressorNamed("stochastic");
  const costmodel::PayloadCostModel payload;
  // Under payload the free decrease makes fewer coordinates worth their bits.
  CHECK(tunerNamed("cat", 0, 1, L)->choose(v, 0, *comp, payload, -1.0, base).level <
        tunerNamed("cat", 0, 1, L)->choose(v, 0, *comp, payload).level);
  // Under packets a push fills its packet, so the compressed part weighs in the check below.
  const costmodel::PacketCostModel packet = costmodel::packetModelOfLink(5e-3, 8e6);
  const TuningDecision with = tunerNamed("cat", 0, 1, L)->choose(v, 0, *comp, packet, -1.0, base);

  const int draws = 2000;
  double mean_decrease = 0.0;
  std::vector<float> y(d);
  for (int k = 0; k < draws; ++k) {
    const auto c = comp->compress(v, with.level, rng);
    for (size_t j = 0; j < d; ++j) y[j] = x[j] - h[j] / static_cast<float>(L);
    compression::addScaled(c.decoded, static_cast<float>(-with.step), y);
    mean_decrease += (f(x) - f(y)) / draws;
  }
  MESSAGE("T " << with.level << " of " << d << ", base " << base << ", predicted "
               << with.predicted_improvement << ", measured " << mean_decrease);
  CHECK(with.predicted_improvement == doctest::Approx(mean_decrease).epsilon(0.01));
  // The compressed part is a sizeable share of it, so the check is not the base's alone.
  CHECK(with.predicted_improvement - base > 0.1 * with.predicted_improvement);
  CHECK(with.level < d);  // a sample, not everything
}

TEST_CASE("a NaN in the vector counts as zero in what a reused level reports") {
  // Between recomputes, stochastic and random-T report an improvement from ||v||^2; a NaN entry
  // must count as zero there, as it does in the sorted profile, not poison the report.
  Rng rng(41);
  std::vector<float> v = randomVector(500, Shape::kGaussian, rng);
  const costmodel::PayloadCostModel payload;
  for (const std::string name : {"stochastic", "randomk"}) {
    CAPTURE(name);
    compression::CompressorSpec spec;
    spec.name = name;
    const auto comp = compression::makeCompressor(spec);
    TunerSpec ts;
    ts.kind = TunerKind::kCat;
    ts.recompute_every = 10;
    ts.recompute_drift = 0.0;
    auto tuner = makeTuner(ts);
    const TuningDecision first = tuner->choose(v, 0, *comp, payload);
    std::vector<float> with_nan = v;
    with_nan[3] = std::nanf("");
    const TuningDecision reused = tuner->choose(with_nan, 0, *comp, payload);
    CHECK_FALSE(reused.recomputed);
    CHECK(std::isfinite(reused.predicted_improvement));
    CHECK(std::isfinite(reused.step));
    if (name == "randomk") {
      double norm2 = 0.0;
      for (size_t j = 0; j < v.size(); ++j)
        if (j != 3) norm2 += double(v[j]) * v[j];
      CHECK(reused.predicted_improvement ==
            doctest::Approx(double(first.level) / double(v.size()) * norm2 / 2.0));
    }
  }
}

TEST_CASE(
    "given the receiver's step, cat picks the exhaustive argmax there and reports that step") {
  Rng rng(53);
  const costmodel::PacketCostModel packet = costmodel::packetModelOfLink(5e-3, 8e6);
  const double L = 2.0;
  for (const std::string name : {"topk", "sq", "stochastic", "randomk"}) {
    auto comp = compressorNamed(name);
    const std::vector<float> v = randomVector(3000, Shape::kHeavyTailed, rng);
    for (const double eta : {1.0 / L, 0.3 / L, 1.5 / L, 2.5 / L}) {
      CAPTURE(name);
      CAPTURE(eta);
      const TuningDecision d =
          tunerNamed("cat", 0, 1, L)->choose(v, 0, *comp, packet, -1.0, 0.0, eta);
      MagnitudeProfile p(v, v.size());
      const Selection s = selectLevelBruteForce(*schemeOf(name), p, L, 3000, *comp, packet,
                                                std::numeric_limits<double>::infinity(), 0.0, eta);
      CHECK(d.level == s.level);
      CHECK(d.step == eta);
      CHECK(d.predicted_improvement == doctest::Approx(s.improvement).epsilon(1e-12));
    }
  }
}

TEST_CASE("the hybrid recomputes T* at once when the step changes") {
  Rng rng(59);
  auto comp = compressorNamed("stochastic");
  const costmodel::PayloadCostModel payload(66);
  const double L = 1.0;
  const std::vector<float> v = randomVector(2000, Shape::kHeavyTailed, rng);
  auto hybrid = tunerNamed("cat", 0, 100, L);
  const TuningDecision a = hybrid->choose(v, 0, *comp, payload, -1.0, 0.0, 0.1 / L);
  const TuningDecision same = hybrid->choose(v, 0, *comp, payload, -1.0, 0.0, 0.1 / L);
  CHECK_FALSE(same.recomputed);
  const TuningDecision b = hybrid->choose(v, 0, *comp, payload, -1.0, 0.0, 1.5 / L);
  CHECK(b.recomputed);
  CHECK(b.step == 1.5 / L);
  // A longer step makes stochastic's noise dearer: it keeps more coordinates.
  CHECK(b.level > a.level);
  MagnitudeProfile p(v, v.size());
  CHECK(b.level == selectLevelBruteForce(Scheme::kStochastic, p, L, 2000, *comp, payload,
                                         std::numeric_limits<double>::infinity(), 0.0, 1.5 / L)
                       .level);
  // Back to the paper's step: the paper's choice.
  const TuningDecision c = hybrid->choose(v, 0, *comp, payload);
  CHECK(c.recomputed);
  CHECK(c.level == tunerNamed("cat", 0, 1, L)->choose(v, 0, *comp, payload).level);
}

TEST_CASE("a reused level reports the bound at the step it was chosen for") {
  Rng rng(61);
  const costmodel::PayloadCostModel payload(66);
  const double L = 2.0, eta = 0.4;
  for (const std::string name : {"stochastic", "randomk"}) {
    auto comp = compressorNamed(name);
    auto hybrid = tunerNamed("cat", 0, 5, L);
    const std::vector<float> first = randomVector(1000, Shape::kGaussian, rng);
    const std::vector<float> second = randomVector(1000, Shape::kHeavyTailed, rng);
    const TuningDecision a = hybrid->choose(first, 0, *comp, payload, -1.0, 0.0, eta);
    const TuningDecision b = hybrid->choose(second, 0, *comp, payload, -1.0, 0.0, eta);
    CAPTURE(name);
    REQUIRE_FALSE(b.recomputed);
    REQUIRE(b.level == a.level);
    const MagnitudeProfile p(second, second.size());
    CHECK(b.step == eta);
    CHECK(b.predicted_improvement ==
          doctest::Approx(improvement(*schemeOf(name), p, b.level, L, eta)).epsilon(1e-9));
  }
}

TEST_CASE("every tuner refuses a negative or non-finite step") {
  auto comp = compressorNamed("topk");
  const costmodel::PayloadCostModel payload;
  const std::vector<float> v = {1.0f, -2.0f, 3.0f};
  for (const std::string name : {"cat", "fixed", "dynamic", "full"}) {
    for (const double bad : {-0.1, std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity()}) {
      CAPTURE(name);
      CHECK_THROWS_AS(tunerNamed(name)->choose(v, 0, *comp, payload, -1.0, 0.0, bad),
                      std::invalid_argument);
    }
  }
}

TEST_CASE("fixed and full report the bound at the given step") {
  Rng rng(67);
  const costmodel::PayloadCostModel payload;
  const double L = 3.0, eta = 0.5;  // past 2/L: the biased bounds are negative
  const std::vector<float> v = randomVector(500, Shape::kGaussian, rng);
  const MagnitudeProfile p(v, v.size());
  for (const std::string name : {"topk", "sq", "stochastic", "randomk"}) {
    auto comp = compressorNamed(name);
    CAPTURE(name);
    const TuningDecision f =
        tunerNamed("fixed", 40, 1, L)->choose(v, 0, *comp, payload, -1.0, 0.0, eta);
    CHECK(f.step == eta);
    CHECK(f.predicted_improvement ==
          doctest::Approx(improvement(*schemeOf(name), p, 40, L, eta)).epsilon(1e-9));
    const TuningDecision full =
        tunerNamed("full", 0, 1, L)->choose(v, 0, *comp, payload, -1.0, 0.0, eta);
    CHECK(full.step == eta);
    // Closed form at T = d: every scheme sends v exactly (omega = 1), but S+Q, which sends
    // ||v||_1 / nnz on each non-zero's sign, decoding to a vector of squared norm ||v||_1^2 / nnz.
    double l1 = 0.0, l2 = 0.0;
    size_t nnz = 0;
    for (float x : v) {
      l1 += std::fabs(double(x));
      l2 += double(x) * double(x);
      nnz += x != 0.0f;
    }
    const double moment = name == "sq" ? l1 * l1 / double(nnz) : l2;
    CHECK(full.predicted_improvement ==
          doctest::Approx(eta * (1.0 - L * eta / 2.0) * moment).epsilon(1e-9));
  }
}
