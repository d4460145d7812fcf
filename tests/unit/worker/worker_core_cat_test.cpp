// The worker core's cat tuner: the level sent is the best of a scan of every level at the price
// the push pays on the wire (bytes, or packets), priced at the step the coordinator's round start
// says where the smoothness bound guarantees it, else at the paper's step.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "tests/unit/worker/worker_rig.hpp"

using namespace tern;
using namespace tern::testing;

namespace {

// A worker with top-k, error feedback and cat under the payload model, after its first push for
// a round start carrying `learning_rate`: the push, the vector cat chose from (the residual plus
// what was sent), the shard's smoothness and the cost per level as priced.
struct FirstCatPush {
  std::unique_ptr<Rig> rig;
  Message push;
  std::vector<double> v;
  double L = 0.0;
  std::vector<double> cost;  // by level, the push's price
  double overhead = 0.0;     // bytes priced besides the codec's
  size_t sent = 0;           // coordinates the payload carries
};

FirstCatPush firstCatPush(double learning_rate,
                          config::StepRule step = config::StepRule::kCoordinator) {
  FirstCatPush r;
  r.rig = std::make_unique<Rig>(0, 2, 40, [&](config::WorkerSettings& s) {
    s.compressor.name = "topk";
    s.error_feedback = true;
    s.error_feedback_auto = false;
    s.tuning.method = tern::tuning::TunerKind::kCat;
    s.tuning.cost_model = tern::costmodel::CostModelKind::kPayload;
    s.tuning.step = step;
    s.link.measure = false;
  });
  r.rig->welcome(16);
  REQUIRE(r.rig->core->joined());
  const auto out = r.rig->roundStart(0, 0.0, learning_rate);
  const auto push = std::find_if(out.begin(), out.end(), isPush);
  REQUIRE(push != out.end());
  r.push = *push;
  const auto d = uint32_t(r.rig->core->parameters().size());
  compression::DecodeLimits limits;
  limits.expected_dim = d;
  const auto sent = compression::decode(r.push.payload, limits);
  REQUIRE(sent.value);
  r.sent = sent.value->indices.size();
  r.v.assign(r.rig->core->residual().begin(), r.rig->core->residual().end());
  std::vector<float> dense(d, 0.0f);
  compression::addScaled(*sent.value, 1.0f, dense);
  for (uint32_t j = 0; j < d; ++j) r.v[j] += dense[j];
  ml::ModelSpec spec;
  spec.kind = "softmax";
  spec.features = 40;
  spec.classes = 2;
  r.L = ml::makeModel(spec)->smoothness(*r.rig->shard).value_or(1.0);
  auto topk = compression::makeCompressor(compression::CompressorSpec{});
  const auto& p = r.push.envelope.push();
  r.overhead = p.predicted_cost() / 8.0 - double(topk->encodedBytes(d, p.level()));
  r.cost.assign(d + 1, 0.0);
  for (uint32_t T = 1; T <= d; ++T)
    r.cost[T] = 8.0 * (double(topk->encodedBytes(d, T)) + r.overhead);
  return r;
}

// S2(T) of v, by T.
std::vector<double> topSquares(const std::vector<double>& v) {
  std::vector<double> sq;
  for (double x : v) sq.push_back(x * x);
  std::sort(sq.begin(), sq.end(), std::greater<>());
  std::vector<double> s2(v.size() + 1, 0.0);
  for (size_t T = 1; T <= v.size(); ++T) s2[T] = s2[T - 1] + sq[T - 1];
  return s2;
}

}  // namespace

TEST_CASE("a worker with cat sends the level a scan of every level picks, and reports it") {
  // Top-k with error feedback under the payload model: after the first push the residual holds
  // everything the push left out, so the vector cat chose from is residual + what was sent.
  FirstCatPush r = firstCatPush(0.0);
  const auto d = uint32_t(r.v.size());
  const std::vector<double> s2 = topSquares(r.v);
  const auto& p = r.push.envelope.push();
  REQUIRE(p.level() >= 1);
  REQUIRE(p.level() <= d);
  CHECK(r.sent == p.level());
  // The price is the push's bits on the wire: the codec's bytes and what the push carries
  // besides (its envelope and the two ZMTP frame headers, 2 bytes up to 255 and 9 above). The
  // tuner prices the envelope before the report fields hold their final values and the payload
  // with a long frame header, so it may count up to 2 + 7 bytes more, never less.
  const auto frame = [](size_t n) { return n <= 255 ? 2.0 : 9.0; };
  const double wire_overhead = double(r.push.envelope.ByteSizeLong()) +
                               frame(r.push.envelope.ByteSizeLong()) + frame(r.push.payload.size());
  CHECK(r.overhead >= wire_overhead);
  CHECK(r.overhead <= wire_overhead + 9.0);
  double best = -1.0;
  for (uint32_t T = 1; T <= d; ++T) best = std::max(best, s2[T] / (2.0 * r.L) / r.cost[T]);
  CHECK(s2[p.level()] / (2.0 * r.L) / r.cost[p.level()] >= best * (1.0 - 1e-12));
  CHECK(p.predicted_improvement() == doctest::Approx(s2[p.level()] / (2.0 * r.L)).epsilon(1e-9));
  CHECK(p.level() < d);  // the scan's best here is a real choice, not everything
}

TEST_CASE("under the packet model a push takes no more packets on the wire than cat priced") {
  // 64-byte packets and a per-packet price well above the fixed one: cat fills the packets it
  // pays for. The envelope and frame headers ride in them too, so a level chosen by the codec's
  // bytes alone would spill into one more packet than it was priced at.
  constexpr double c_fixed = 0.001, c_packet = 0.01;
  constexpr size_t packet = 64;
  Rig rig(0, 2, 40, [&](config::WorkerSettings& s) {
    s.compressor.name = "topk";
    s.error_feedback = true;
    s.error_feedback_auto = false;
    s.tuning.method = tern::tuning::TunerKind::kCat;
    s.tuning.cost_model = tern::costmodel::CostModelKind::kPacket;
    s.tuning.c_fixed = c_fixed;
    s.tuning.c_packet = c_packet;
    s.link.packet_bytes = uint32_t(packet);
    s.link.measure = false;
  });
  rig.welcome(16);
  REQUIRE(rig.core->joined());
  const auto frame = [](size_t n) { return n <= 255 ? size_t{2} : size_t{9}; };
  size_t pushes = 0;
  for (uint64_t r = 0; r < 12; ++r) {
    const auto out = rig.roundStart(r);
    const auto push = std::find_if(out.begin(), out.end(), isPush);
    REQUIRE(push != out.end());
    const auto& p = push->envelope.push();
    const size_t env = push->envelope.ByteSizeLong();
    const size_t wire = env + frame(env) + push->payload.size() + frame(push->payload.size());
    const size_t wire_packets = (wire + packet - 1) / packet;
    const double priced_packets = (p.predicted_cost() - c_fixed) / c_packet;
    CAPTURE(r);
    CAPTURE(p.level());
    CAPTURE(wire);
    CHECK(double(wire_packets) <= priced_packets + 1e-9);
    CHECK(double(wire_packets) >= priced_packets - 1.0 - 1e-9);
    ++pushes;
  }
  CHECK(pushes == 12);
}

TEST_CASE(
    "a round start's learning rate is the step the worker's cat prices its levels at, and the "
    "least harm past 2/L") {
  const double L = firstCatPush(0.0).L;
  for (const double scaled : {0.3, 1.0, 1.5, 2.5}) {
    const double eta = scaled / L;
    CAPTURE(scaled);
    FirstCatPush r = firstCatPush(eta);
    const auto& p = r.push.envelope.push();
    const std::vector<double> s2 = topSquares(r.v);
    const double factor = eta * (1.0 - L * eta / 2.0);
    const size_t d = r.v.size();
    // Closed form: the best ratio among levels that earn a decrease, else the least harm (the
    // smallest S2: one coordinate).
    CHECK(r.rig->core->stats().rejected == 0);
    REQUIRE(p.level() >= 1);
    REQUIRE(p.level() <= d);
    if (factor > 0.0) {
      double best = -1.0;
      for (uint32_t T = 1; T <= d; ++T) best = std::max(best, factor * s2[T] / r.cost[T]);
      CHECK(factor * s2[p.level()] / r.cost[p.level()] >= best * (1.0 - 1e-12));
      CHECK(p.level() > 1);
    } else {
      CHECK(p.level() == 1);
    }
    CHECK(r.rig->core->stats().last_step == eta);
    CHECK(p.predicted_step() == eta);
    CHECK(p.predicted_improvement() ==
          doctest::Approx(factor * s2[p.level()]).epsilon(1e-9).scale(1e-12));
    if (scaled > 2.0) CHECK(p.predicted_improvement() < 0.0);
  }
}

TEST_CASE("a bad learning rate in a round start is refused and the paper's step kept") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const double bad : {nan, -0.5, inf}) {
    CAPTURE(bad);
    FirstCatPush r = firstCatPush(bad);
    const auto& p = r.push.envelope.push();
    const std::vector<double> s2 = topSquares(r.v);
    CHECK(r.rig->core->stats().rejected == 1);
    CHECK(r.rig->core->stats().last_step == doctest::Approx(1.0 / r.L).epsilon(1e-12));
    CHECK(p.predicted_improvement() == doctest::Approx(s2[p.level()] / (2.0 * r.L)).epsilon(1e-9));
  }
  // Not said (0) is no error: the paper's step, nothing refused.
  FirstCatPush none = firstCatPush(0.0);
  CHECK(none.rig->core->stats().rejected == 0);
  CHECK(none.rig->core->stats().last_step == doctest::Approx(1.0 / none.L).epsilon(1e-12));
}

TEST_CASE("with tuning.step paper the worker's cat ignores the coordinator's learning rate") {
  const double L = firstCatPush(0.0).L;
  FirstCatPush r = firstCatPush(2.5 / L, config::StepRule::kPaper);
  const auto& p = r.push.envelope.push();
  const std::vector<double> s2 = topSquares(r.v);
  CHECK(r.rig->core->stats().rejected == 0);
  CHECK(r.rig->core->stats().last_step == doctest::Approx(1.0 / L).epsilon(1e-12));
  CHECK(p.predicted_improvement() == doctest::Approx(s2[p.level()] / (2.0 * L)).epsilon(1e-9));
  CHECK(p.level() > 1);
}

TEST_CASE("by default the worker's cat takes the coordinator's step only where L guarantees it") {
  const double L = firstCatPush(0.0).L;
  // lr L < 2: the bound at the coordinator's step is informative, and it is the step priced.
  FirstCatPush below = firstCatPush(0.3 / L, config::StepRule::kAuto);
  CHECK(below.rig->core->stats().last_step == doctest::Approx(0.3 / L).epsilon(1e-12));
  // lr L >= 2: the bound guarantees no decrease at any level; the paper's step stands in.
  FirstCatPush past = firstCatPush(2.5 / L, config::StepRule::kAuto);
  const auto& p = past.push.envelope.push();
  const std::vector<double> s2 = topSquares(past.v);
  CHECK(past.rig->core->stats().rejected == 0);
  CHECK(past.rig->core->stats().last_step == doctest::Approx(1.0 / L).epsilon(1e-12));
  CHECK(p.predicted_improvement() == doctest::Approx(s2[p.level()] / (2.0 * L)).epsilon(1e-9));
  CHECK(p.level() > 1);
}

TEST_CASE("a model without a smoothness bound keeps the paper's step by default") {
  // The MLP gives no bound (L = 1 stands in): auto cannot tell whether the coordinator's step
  // is safe, so the tuner prices at the stand-in's paper step, whatever the learning rate.
  for (const auto step : {config::StepRule::kAuto, config::StepRule::kCoordinator}) {
    CAPTURE(config::stepRuleName(step));
    Rig rig(0, 2, 40, [&](config::WorkerSettings& s) {
      s.compressor.name = "topk";
      s.tuning.method = tern::tuning::TunerKind::kCat;
      s.tuning.cost_model = tern::costmodel::CostModelKind::kPayload;
      s.tuning.step = step;
      s.link.measure = false;
    });
    rig.welcome(16, "mlp");
    REQUIRE(rig.core->joined());
    const auto out = rig.roundStart(0, 0.0, 0.01);
    const auto push = std::find_if(out.begin(), out.end(), isPush);
    REQUIRE(push != out.end());
    CHECK(push->envelope.push().predicted_step() == (step == config::StepRule::kAuto ? 1.0 : 0.01));
  }
}
