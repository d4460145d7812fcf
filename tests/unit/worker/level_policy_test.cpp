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

TEST_CASE("measured cost: cat prices a push in seconds of the worker's round, compute included") {
  const size_t d = 20000;
  const auto v = gaussian(d, 7);
  auto topk = compression::makeCompressor(compression::CompressorSpec{});
  const uint32_t cap = uint32_t(d);
  const double compute = 1.0;  // a second of compute against 1 ms a packet

  worker::LevelPolicy link_only(measured(), 1448, 1.0);
  const auto alone = link_only.choose(v, cap, *topk, fit(true));
  CHECK(alone.level < d / 10);  // a packet costs as much as the push: about one packet

  // Every level pays the second of compute: the cost is nearly flat, and most of the cap earns
  // most (the codec's bytes per coordinate fall near the cap, so the exact level is its own).
  worker::LevelPolicy with_compute(measured(), 1448, 1.0);
  const auto round =
      with_compute.choose(v, cap, *topk, fit(true), 0, tuning::kBestStep, {}, compute);
  CHECK(round.level > d / 2);
  const size_t bytes = topk->encodedBytes(uint32_t(d), round.level);
  CHECK(round.predicted_cost == doctest::Approx(compute + 1e-3 + 1e-3 * std::ceil(bytes / 1448.0)));

  // The paper's criterion prices the link alone, and a compute time that is no time is ignored.
  auto paper_settings = measured();
  paper_settings.method = tuning::TunerKind::kCatPaper;
  worker::LevelPolicy paper(paper_settings, 1448, 1.0);
  CHECK(paper.choose(v, cap, *topk, fit(true), 0, tuning::kBestStep, {}, compute).level < d / 10);
  worker::LevelPolicy nan_compute(measured(), 1448, 1.0);
  CHECK(
      nan_compute.choose(v, cap, *topk, fit(true), 0, tuning::kBestStep, {}, std::nan("")).level ==
      alone.level);
}
