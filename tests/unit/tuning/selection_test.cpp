#include "common/tuning/selection.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/tuning/improvement.hpp"
#include "common/tuning/magnitude_profile.hpp"
#include "random_vectors.hpp"

using namespace tern;
using namespace tern::tuning;
using tern::tuning::testing::allShapes;
using tern::tuning::testing::randomVector;
using tern::tuning::testing::Shape;
using tern::tuning::testing::shapeName;

namespace {

std::vector<std::unique_ptr<costmodel::CostModel>> costModels() {
  std::vector<std::unique_ptr<costmodel::CostModel>> models;
  models.push_back(std::make_unique<costmodel::PayloadCostModel>(0));
  models.push_back(std::make_unique<costmodel::PayloadCostModel>(66));
  // A 5 ms, 8 Mbit/s link; a link with tiny packets (many plateaus); one whose fixed cost
  // dwarfs everything (pushes T up to the cap).
  models.push_back(
      std::make_unique<costmodel::PacketCostModel>(costmodel::packetModelOfLink(5e-3, 8e6)));
  models.push_back(std::make_unique<costmodel::PacketCostModel>(0.0, 1.0, 16));
  models.push_back(std::make_unique<costmodel::PacketCostModel>(10.0, 1e-3, 1448));
  // With what a message carries besides the codec's bytes (a push's envelope and frames): the
  // packet boundaries move by that much.
  models.push_back(std::make_unique<costmodel::PacketCostModel>(5e-3, 1.5e-3, 1448, 124));
  models.push_back(std::make_unique<costmodel::PacketCostModel>(0.0, 1.0, 16, 7));
  models.push_back(std::make_unique<costmodel::AffineCostModel>(1e-3, 1e-6));
  models.push_back(std::make_unique<costmodel::AffineCostModel>(0.0, 1.0));
  return models;
}

std::unique_ptr<compression::Compressor> compressorNamed(const std::string& name) {
  compression::CompressorSpec spec;
  spec.name = name;
  return compression::makeCompressor(spec);
}

// One compressor, cost model, vector shape and random vector of the grid the tests sweep.
struct Setting {
  const std::string& name;
  const compression::Compressor& comp;
  Scheme scheme;
  const costmodel::CostModel& model;
  Shape shape;
  const std::vector<float>& v;
};

// Calls fn(setting) for every compressor with a level, every cost model of costModels(), every
// shape and every dimension in dims, drawing each vector from rng in that order.
template <class Fn>
void forEachSetting(Rng& rng, std::initializer_list<size_t> dims, Fn&& fn) {
  const auto models = costModels();
  for (const std::string name : {"topk", "sq", "stochastic", "randomk"}) {
    const auto comp = compressorNamed(name);
    const Scheme scheme = *schemeOf(name);
    for (const auto& model : models) {
      for (const auto shape : allShapes()) {
        for (const size_t d : dims) {
          const std::vector<float> v = randomVector(d, shape, rng);
          fn(Setting{name, *comp, scheme, *model, shape, v});
        }
      }
    }
  }
}

// Independent scan over every T of credited(improvement(T)) / C(T); ties to the smaller T.
template <class Credit>
std::pair<uint32_t, double> scanArgmax(const Setting& s, MagnitudeProfile& full, double L,
                                       Credit&& credited, uint32_t max_level = 0) {
  const auto dim = static_cast<uint32_t>(s.v.size());
  const uint32_t last = max_level == 0 ? dim : max_level;
  uint32_t best_level = 0;
  double best_ratio = -1.0;
  for (uint32_t T = 1; T <= last; ++T) {
    const double r =
        credited(improvement(s.scheme, full, T, L)) / s.model.cost(s.comp.encodedBytes(dim, T));
    if (r > best_ratio) {
      best_ratio = r;
      best_level = T;
    }
  }
  return {best_level, best_ratio};
}

}  // namespace

TEST_CASE(
    "the fast selection returns the brute-force argmax for every compressor, cost model "
    "and cap") {
  Rng rng(20240601);
  size_t cases = 0;
  forEachSetting(rng, {1, 2, 3, 10, 97, 1000, 4099}, [&](const Setting& s) {
    const size_t d = s.v.size();
    const auto dim = static_cast<uint32_t>(d);
    for (const uint32_t m : {dim, std::max<uint32_t>(1, dim / 3), 1u}) {
      const double L = std::uniform_real_distribution<double>(0.1, 10.0)(rng);
      // The fast search starts from a partly sorted profile and grows it; the reference
      // sorts everything it looks at.
      const size_t presorted = std::vector<size_t>{0, 1, 40, d}[cases % 4];
      MagnitudeProfile lazy(s.v, presorted);
      MagnitudeProfile full(s.v, d);
      const Selection fast = selectLevel(s.scheme, lazy, L, m, s.comp, s.model);
      const Selection brute = selectLevelBruteForce(s.scheme, full, L, m, s.comp, s.model);
      // And a scan written here, which shares nothing with the search but the improvement
      // formulas (checked against closed forms on their own).
      const auto [scan_level, scan_ratio] = scanArgmax(
          s, full, L, [](double raw) { return raw; }, m);
      CAPTURE(s.name);
      CAPTURE(s.model.name());
      CAPTURE(shapeName(s.shape));
      CAPTURE(d);
      CAPTURE(m);
      CAPTURE(presorted);
      CHECK(fast.level == brute.level);
      CHECK(fast.ratio == brute.ratio);
      CHECK(fast.level == scan_level);
      CHECK(fast.ratio == doctest::Approx(scan_ratio).epsilon(1e-12));
      CHECK(fast.level <= m);
      ++cases;
    }
  });
  CHECK(cases == 4 * 9 * 4 * 7 * 3);
}

TEST_CASE("the fast selection evaluates a small fraction of the levels on a gradient-like vector") {
  // Power-law magnitudes, the shape of a logistic-regression gradient on sparse data.
  Rng rng(7);
  const size_t d = 50000;
  const std::vector<float> v = randomVector(d, tuning::testing::Shape::kHeavyTailed, rng);
  const auto comp = compressorNamed("topk");
  const auto m = static_cast<uint32_t>(d);
  // The models of real links: bits, a 5 ms / 8 Mbit/s link, a fitted affine line. (A model
  // whose fixed cost dwarfs everything makes the ratio flat near T = d, and then most of the
  // range has to be looked at; the search is still exact there, only not faster.)
  std::vector<std::unique_ptr<costmodel::CostModel>> models;
  models.push_back(std::make_unique<costmodel::PayloadCostModel>(0));
  models.push_back(
      std::make_unique<costmodel::PacketCostModel>(costmodel::packetModelOfLink(5e-3, 8e6)));
  models.push_back(std::make_unique<costmodel::AffineCostModel>(1e-3, 1e-6));
  for (const auto& model : models) {
    CAPTURE(model->name());
    MagnitudeProfile lazy(v, 512);
    MagnitudeProfile full(v, d);
    const Selection fast = selectLevel(Scheme::kTopT, lazy, 1.0, m, *comp, *model);
    const Selection brute = selectLevelBruteForce(Scheme::kTopT, full, 1.0, m, *comp, *model);
    CHECK(fast.level == brute.level);
    CHECK(fast.evaluations < brute.evaluations / 10);
    MESSAGE(model->name() << ": T* = " << fast.level << ", " << fast.evaluations << " evaluations, "
                          << lazy.sortedCount() << " magnitudes sorted");
    // Unless T* is the whole vector, the order was never built for all of d.
    if (fast.level < m) CHECK(lazy.sortedCount() < d);
  }
}

TEST_CASE("a packet model makes CAT fill the packet it pays for when improvement grows with T") {
  // Flat cost inside a packet and a non-decreasing top-T improvement: the best T is the last
  // one that still fits the packets chosen (or the dimension).
  Rng rng(11);
  const std::vector<float> v = randomVector(20000, tuning::testing::Shape::kGaussian, rng);
  const auto comp = compressorNamed("topk");
  const costmodel::PacketCostModel model = costmodel::packetModelOfLink(5e-3, 8e6);
  MagnitudeProfile p(v, 0);
  const Selection s =
      selectLevel(Scheme::kTopT, p, 1.0, static_cast<uint32_t>(v.size()), *comp, model);
  REQUIRE(s.level < v.size());
  const size_t packets = model.packets(comp->encodedBytes(20000, s.level));
  CHECK(model.packets(comp->encodedBytes(20000, s.level + 1)) > packets);
}

TEST_CASE("selection rejects an empty level range and a non-positive smoothness") {
  const std::vector<float> v = {1, 2, 3, 4};
  const auto comp = compressorNamed("topk");
  const costmodel::PayloadCostModel model;
  MagnitudeProfile p(v, 2);
  CHECK_THROWS_AS(selectLevel(Scheme::kTopT, p, 1.0, 5, *comp, model), std::invalid_argument);
  CHECK_THROWS_AS(selectLevel(Scheme::kTopT, p, 1.0, 0, *comp, model), std::invalid_argument);
  CHECK_THROWS_AS(selectLevel(Scheme::kTopT, p, 0.0, 2, *comp, model), std::invalid_argument);
}

TEST_CASE(
    "with a credit limit or a base improvement the fast selection returns the exhaustive argmax") {
  Rng rng(20261201);
  const double inf = std::numeric_limits<double>::infinity();
  size_t binding = 0;
  size_t moved = 0;
  size_t cases = 0;
  forEachSetting(rng, {1, 10, 97, 1000, 4099}, [&](const Setting& s) {
    const size_t d = s.v.size();
    const auto dim = static_cast<uint32_t>(d);
    const double L = std::uniform_real_distribution<double>(0.1, 10.0)(rng);
    MagnitudeProfile full(s.v, d);
    const double whole = improvementOfWhole(s.scheme, full, L);
    // A limit below what sending everything would earn, where it changes the answer, a little
    // above it, or 0 (every level credited nothing); a base from nothing to several times it.
    const double limit =
        cases % 7 == 0 ? 0.0 : whole * std::uniform_real_distribution<double>(0.02, 1.2)(rng);
    const double base =
        cases % 5 == 0 ? 0.0 : whole * std::uniform_real_distribution<double>(0.0, 5.0)(rng);
    const uint32_t plain = selectLevel(s.scheme, full, L, dim, s.comp, s.model).level;
    for (const bool with_base : {false, true}) {
      const double cap = with_base ? inf : limit;
      const double add = with_base ? base : 0.0;
      MagnitudeProfile lazy(s.v, std::vector<size_t>{0, 1, 40, d}[cases % 4]);
      const Selection fast = selectLevel(s.scheme, lazy, L, dim, s.comp, s.model, cap, add);
      // Independent scan: every T, base plus its improvement capped at the limit, over its cost.
      bool capped = false;
      const auto [best_level, best_ratio] = scanArgmax(s, full, L, [&](double raw) {
        capped = capped || add + raw > cap;
        return std::min(add + raw, cap);
      });
      if (with_base) {
        moved += best_level != plain;
      } else {
        binding += capped;
      }
      CAPTURE(s.name);
      CAPTURE(s.model.name());
      CAPTURE(shapeName(s.shape));
      CAPTURE(d);
      CAPTURE(cap);
      CAPTURE(add);
      CHECK(fast.level == best_level);
      CHECK(fast.ratio == doctest::Approx(best_ratio).epsilon(1e-12));
      CHECK(fast.improvement <= cap);
      CHECK(fast.improvement ==
            doctest::Approx(std::min(add + improvement(s.scheme, full, fast.level, L), cap)));
    }
    ++cases;
  });
  MESSAGE(cases << " cases, the limit bound some level in " << binding << ", the base moved T* in "
                << moved);
  CHECK(binding > cases / 2);
  CHECK(moved > cases / 4);
}

TEST_CASE("a base improvement must be finite and non-negative") {
  const std::vector<float> v = {1.0f, -2.0f, 0.5f};
  const auto comp = compressorNamed("topk");
  const costmodel::PayloadCostModel model;
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {-1e-9, inf, std::numeric_limits<double>::quiet_NaN()}) {
    MagnitudeProfile p(v, 1);
    CHECK_THROWS_AS(selectLevel(Scheme::kTopT, p, 1.0, 3, *comp, model, inf, bad),
                    std::invalid_argument);
  }
}

TEST_CASE("packet steps are exactly the levels after which the packet count rises") {
  for (const std::string name : {"topk", "sq", "stochastic"}) {
    const auto comp = compressorNamed(name);
    for (const uint32_t dim : {300u, 5000u, 47236u}) {
      for (const size_t packet : {size_t{200}, size_t{1448}}) {
        for (const size_t overhead : {size_t{0}, size_t{124}}) {
          for (const uint32_t last : {1u, 2u, dim / 3, dim - 1}) {
            CAPTURE(name);
            CAPTURE(dim);
            CAPTURE(packet);
            CAPTURE(overhead);
            CAPTURE(last);
            const auto steps = packetSteps(*comp, dim, last, packet, 1.0, overhead);
            REQUIRE(steps.has_value());
            std::vector<uint32_t> expected;
            for (uint32_t T = 1; T < last; ++T)
              if ((comp->encodedBytes(dim, T + 1) + overhead + packet - 1) / packet >
                  (comp->encodedBytes(dim, T) + overhead + packet - 1) / packet)
                expected.push_back(T);
            CHECK(*steps == expected);
          }
        }
      }
    }
  }
  const auto comp = compressorNamed("topk");
  CHECK_FALSE(packetSteps(*comp, 5000, 4999, 0, 1.0).has_value());
  // About 5 bytes a top-k level: some 40 levels in a 200-byte packet, fewer than 64.
  CHECK_FALSE(packetSteps(*comp, 5000, 4999, 200, 64.0).has_value());
}

TEST_CASE(
    "at the receiver's step the fast selection returns the exhaustive argmax, and the least harm "
    "where no level earns a decrease") {
  Rng rng(20250311);
  size_t cases = 0, harmed = 0, stochastic_mixed = 0, moved = 0;
  forEachSetting(rng, {1, 3, 10, 97, 1000, 4099}, [&](const Setting& s) {
    const size_t d = s.v.size();
    const auto dim = static_cast<uint32_t>(d);
    const double L = std::uniform_real_distribution<double>(0.1, 10.0)(rng);
    MagnitudeProfile full(s.v, d);
    const uint32_t paper = selectLevel(s.scheme, full, L, dim, s.comp, s.model).level;
    // eta = 1/L (the paper's step for top-T and S+Q), below it, past it, and past 2/L (where
    // every biased level overshoots); 0.02/L makes stochastic's small T overshoot and its large
    // T earn.
    for (const double scaled : {1.0, 0.3, 1.5, 2.5, 0.02}) {
      const double eta = scaled / L;
      for (const uint32_t m : {dim, std::max<uint32_t>(1, dim / 3)}) {
        MagnitudeProfile lazy(s.v, std::vector<size_t>{0, 1, 40, d}[cases % 4]);
        const double inf = std::numeric_limits<double>::infinity();
        const Selection fast = selectLevel(s.scheme, lazy, L, m, s.comp, s.model, inf, 0.0, eta);
        MagnitudeProfile sorted(s.v, d);
        const Selection brute =
            selectLevelBruteForce(s.scheme, sorted, L, m, s.comp, s.model, inf, 0.0, eta);
        // Independent scan: the closed form at eta for every T; the best ratio among the levels
        // that earn a decrease, else the largest improvement; ties to the smaller T.
        uint32_t ratio_level = 0, harm_level = 0;
        double best_ratio = 0.0, best_harm = -inf;
        bool negative = false, positive = false;
        for (uint32_t T = 1; T <= m; ++T) {
          double imp = 0.0;
          const double S = full.totalL2sq();
          switch (s.scheme) {
            case Scheme::kTopT:
              imp = eta * (1.0 - L * eta / 2.0) * full.s2(T);
              break;
            case Scheme::kSignScale: {
              const double sent = double(std::max<size_t>(1, std::min<size_t>(T, full.nonZeros())));
              imp = eta * (1.0 - L * eta / 2.0) * full.s1(T) * full.s1(T) / sent;
              break;
            }
            case Scheme::kStochastic:
              imp = eta * S * (1.0 - L * eta / (2.0 * stochasticOmega(full, T)));
              break;
            case Scheme::kUniform:
              imp = eta * S * (1.0 - L * eta * double(d) / (2.0 * T));
              break;
          }
          CHECK(std::fabs(improvement(s.scheme, full, T, L, eta) - imp) <=
                1e-9 * (eta * S + std::fabs(imp)));
          // Closed form and code round differently: compare the code's values for the argmax.
          imp = improvement(s.scheme, full, T, L, eta);
          negative = negative || imp < 0.0;
          positive = positive || imp > 0.0;
          const double r = imp / s.model.cost(s.comp.encodedBytes(dim, T));
          if (imp > 0.0 && r > best_ratio) {
            best_ratio = r;
            ratio_level = T;
          }
          if (imp > best_harm) {
            best_harm = imp;
            harm_level = T;
          }
        }
        const uint32_t expected = ratio_level != 0 ? ratio_level : harm_level;
        CAPTURE(s.name);
        CAPTURE(s.model.name());
        CAPTURE(shapeName(s.shape));
        CAPTURE(d);
        CAPTURE(m);
        CAPTURE(scaled);
        CHECK(fast.level == brute.level);
        CHECK(fast.improvement == brute.improvement);
        CHECK(fast.level == expected);
        CHECK(fast.improvement == improvement(s.scheme, full, fast.level, L, eta));
        if (ratio_level == 0 && negative) {
          ++harmed;
          CHECK(fast.improvement <= 0.0);
        }
        stochastic_mixed += s.scheme == Scheme::kStochastic && negative && positive;
        moved += m == dim && fast.level != paper;
        ++cases;
      }
    }
  });
  MESSAGE(cases << " cases, least harm in " << harmed << ", stochastic with both signs in "
                << stochastic_mixed << ", T* moved from the paper's in " << moved);
  CHECK(harmed > cases / 10);
  CHECK(stochastic_mixed > 0);
  CHECK(moved > 0);
}

TEST_CASE("at a step past 2/L top-T sends the least harm: one coordinate") {
  const std::vector<float> v = {3.0f, -1.0f, 0.5f, 2.0f, -4.0f};
  const auto comp = compressorNamed("topk");
  const costmodel::PayloadCostModel model;
  const double L = 2.0, eta = 1.5;  // L eta = 3: the factor eta (1 - L eta / 2) is -0.75
  MagnitudeProfile p(v, 0);
  const Selection s = selectLevel(Scheme::kTopT, p, L, 5, *comp, model,
                                  std::numeric_limits<double>::infinity(), 0.0, eta);
  CHECK(s.level == 1);
  CHECK(s.improvement == doctest::Approx(-0.75 * 16.0));
}

TEST_CASE("a step must be finite and non-negative") {
  const std::vector<float> v = {1.0f, -2.0f, 0.5f};
  const auto comp = compressorNamed("topk");
  const costmodel::PayloadCostModel model;
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {-1e-3, inf, std::numeric_limits<double>::quiet_NaN()}) {
    MagnitudeProfile p(v, 1);
    CHECK_THROWS_AS(selectLevel(Scheme::kTopT, p, 1.0, 3, *comp, model, inf, 0.0, bad),
                    std::invalid_argument);
  }
  // Finite, but L eta^2 ||v||^2 overflows: every bound would be -inf, so no level is chosen.
  MagnitudeProfile p(v, 1);
  CHECK_THROWS_AS(selectLevel(Scheme::kTopT, p, 1e150, 3, *comp, model, inf, 0.0, 1e160),
                  std::invalid_argument);
  CHECK(selectLevel(Scheme::kTopT, p, 1e150, 3, *comp, model, inf, 0.0, 1e6).level == 1);
}
