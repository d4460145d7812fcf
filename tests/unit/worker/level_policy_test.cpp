// The worker's level policy under the measured cost model: the fitted link prices each level as
// a + b * ceil(bytes / packet), the configured constants serve only until a first fit exists,
// and a fit the estimator later withdraws (sizes too alike to separate a and b) leaves the last
// one in force rather than the constants.
#include "worker/level_policy.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/compression/compressor.hpp"

using namespace tern;

namespace {

std::vector<float> gaussian(size_t d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> v(d);
  for (auto& x : v) x = n(rng);
  return v;
}

config::TuningSettings measured() {
  config::TuningSettings s;
  s.method = tern::tuning::TunerKind::kCat;
  s.cost_model = tern::costmodel::CostModelKind::kMeasured;
  // Configured: a packet costs almost nothing next to a push, so cat sends everything.
  s.c_fixed = 1.0;
  s.c_packet = 1e-9;
  return s;
}

costmodel::LinkFit fit(bool valid) {
  costmodel::LinkFit f;
  // Fitted: a packet costs as much as a push, so cat sends what fills one packet.
  f.a = 1e-3;
  f.b = 1e-3;
  f.packet_bytes = 1448;
  f.samples = 40;
  f.valid = valid;
  return f;
}

}  // namespace

TEST_CASE(
    "measured cost: the fit prices levels once it exists, and a withdrawn fit stays in force") {
  const size_t d = 20000;
  const auto v = gaussian(d, 7);
  auto topk = compression::makeCompressor(compression::CompressorSpec{});
  const uint32_t cap = uint32_t(d);

  worker::LevelPolicy fresh(measured(), 1448, 1.0);
  const auto configured = fresh.choose(v, cap, *topk, fit(false));
  CHECK(configured.level == d);  // no fit yet: the constants

  worker::LevelPolicy policy(measured(), 1448, 1.0);
  const auto fitted = policy.choose(v, cap, *topk, fit(true));
  const auto withdrawn = policy.choose(v, cap, *topk, fit(false));
  const size_t bytes = topk->encodedBytes(uint32_t(d), fitted.level);
  CHECK(fitted.predicted_cost == doctest::Approx(1e-3 + 1e-3 * std::ceil(bytes / 1448.0)));
  CHECK(fitted.level < d / 10);
  CHECK(withdrawn.level == fitted.level);
  CHECK(withdrawn.predicted_cost == fitted.predicted_cost);
}
