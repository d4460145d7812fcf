// Compressed downloads: the broadcast carries the step's largest changes, as many as the round's
// pushes carried (or download.ratio of the model); the rest waits in the download residual, and
// a replica that adds every broadcast stays bit-identical with the coordinator.
#include <doctest/doctest.h>

#include <random>

#include "common/util/checksum.hpp"
#include "server/aggregator.hpp"
#include "tests/unit/coordinator/dense_gradient.hpp"

using namespace tern;
using namespace tern::server;

namespace {

ml::OptimizerSpec momentumSgd() {
  ml::OptimizerSpec sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  return sgd;
}

config::AggregationSettings downloadRatio(double ratio) {
  config::AggregationSettings s;
  s.download_ratio = ratio;
  return s;
}

// A sparse push carrying g's non-zero coordinates (as a top-k push would).
void push(Membership& m, uint32_t id, const std::vector<float>& g) {
  Worker& w = m.all()[id];
  w.rec.id = id;
  w.samples = 1;
  compression::SparseGradient s;
  s.dim = uint32_t(g.size());
  for (uint32_t j = 0; j < g.size(); ++j) {
    if (g[j] == 0.0f) continue;
    s.indices.push_back(j);
    s.values.push_back(g[j]);
  }
  w.pending = std::move(s);
}

std::vector<float> unit(size_t d, size_t j) {
  std::vector<float> g(d, 0.0f);
  g[j] = 1.0f;
  return g;
}

// The broadcast of the last step as (index, value) pairs.
std::vector<std::pair<uint32_t, float>> broadcast(const Aggregator& agg) {
  compression::DecodeLimits limits;
  limits.expected_dim = limits.max_dim = uint32_t(agg.dim());
  limits.max_bytes = 1 << 20;
  auto decoded = compression::decode(agg.lastUpdate(), limits);
  REQUIRE(decoded.value);
  std::vector<float> delta(agg.dim(), 0.0f);
  compression::addScaled(*decoded.value, 1.0f, delta);
  std::vector<std::pair<uint32_t, float>> out;
  for (uint32_t j = 0; j < delta.size(); ++j)
    if (delta[j] != 0.0f) out.emplace_back(j, delta[j]);
  return out;
}

}  // namespace

TEST_CASE("with momentum the broadcast carries as many changes as the pushes and the rest waits") {
  Aggregator agg(momentumSgd(), std::vector<float>(8, 0.0f), 1 << 20);
  Membership m;
  push(m, 0, unit(8, 0));
  agg.step(m, 0);
  CHECK(broadcast(agg) == std::vector<std::pair<uint32_t, float>>{{0, -0.1f}});
  CHECK(agg.downloadResidual().empty());
  // v = (0.9, 1): the step changes two coordinates, the push carried one.
  push(m, 0, unit(8, 1));
  agg.step(m, 1);
  CHECK(broadcast(agg) == std::vector<std::pair<uint32_t, float>>{{1, -0.1f}});
  REQUIRE(agg.downloadResidual().size() == 8);
  CHECK(agg.downloadResidual()[0] == doctest::Approx(-0.09));
  CHECK(agg.downloadResidual()[1] == 0.0f);
  // v = (0.81, 0.9, 1) plus the residual (-0.09, 0, 0): coordinate 0 is now the largest change.
  push(m, 0, unit(8, 2));
  agg.step(m, 2);
  const auto sent = broadcast(agg);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first == 0);
  CHECK(sent[0].second == doctest::Approx(-0.171));
  CHECK(agg.downloadResidual()[1] == doctest::Approx(-0.09));
  CHECK(agg.downloadResidual()[2] == doctest::Approx(-0.1));
}

TEST_CASE("the model plus the residual is the dense run's model, and replicas stay bit-identical") {
  const size_t d = 64;
  Aggregator sparse(momentumSgd(), std::vector<float>(d, 0.5f), 1 << 20);
  Aggregator full(momentumSgd(), std::vector<float>(d, 0.5f), 1 << 20, downloadRatio(1.0));
  std::vector<float> replica = sparse.parameters();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  Membership ms, mf;
  for (uint64_t round = 0; round < 30; ++round) {
    for (uint32_t id = 0; id < 3; ++id) {
      std::vector<float> g(d, 0.0f);
      for (int i = 0; i < 4; ++i) g[rng() % d] = normal(rng);
      push(ms, id, g);
      push(mf, id, g);
    }
    sparse.step(ms, round);
    full.step(mf, round);
    CHECK(broadcast(sparse).size() <= 12);
    CHECK(full.downloadResidual().empty());
    for (const auto& [j, x] : broadcast(sparse)) replica[j] += x;
    CHECK(checksum(replica) == checksum(sparse.parameters()));
  }
  const auto& residual = sparse.downloadResidual();
  REQUIRE(residual.size() == d);
  for (size_t j = 0; j < d; ++j)
    CHECK(sparse.parameters()[j] + residual[j] ==
          doctest::Approx(full.parameters()[j]).epsilon(1e-4));
}

TEST_CASE(
    "a dense push carries every coordinate, zeros included: the broadcast is the whole step") {
  // Identity's pushes: with momentum the step is dense, and so is what they carried; nothing
  // waits (no selection, no residual), even where the push's values are zero.
  Aggregator agg(momentumSgd(), std::vector<float>(8, 0.0f), 1 << 20);
  Membership m;
  for (int round = 0; round < 3; ++round) {
    Worker& w = m.all()[0];
    w.rec.id = 0;
    w.samples = 1;
    w.pending = dense(unit(8, size_t(round)));
    agg.step(m, uint64_t(round));
    CHECK(broadcast(agg).size() == size_t(round + 1));  // every coordinate momentum moved
    CHECK(agg.downloadResidual().empty());
  }
  // The same for a push listing every coordinate by index (a sparse coding of all of them).
  Worker& w = m.all()[0];
  compression::SparseGradient all;
  all.dim = 8;
  for (uint32_t j = 0; j < 8; ++j) {
    all.indices.push_back(j);
    all.values.push_back(j == 3 ? 1.0f : 0.0f);
  }
  w.pending = all;
  agg.step(m, 3);
  CHECK(broadcast(agg).size() == 4);
  CHECK(agg.downloadResidual().empty());
}

TEST_CASE("download.ratio fixes the broadcast's size") {
  Aggregator agg(momentumSgd(), std::vector<float>(8, 0.0f), 1 << 20, downloadRatio(0.25));
  Membership m;
  push(m, 0, {1, 2, 3, 4, 5, 6, 7, 8});
  agg.step(m, 0);
  const auto sent = broadcast(agg);
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].first == 6);
  CHECK(sent[0].second == doctest::Approx(-0.7));
  CHECK(sent[1].first == 7);
  CHECK(sent[1].second == doctest::Approx(-0.8));
  CHECK(agg.downloadResidual()[5] == doctest::Approx(-0.6));
}

TEST_CASE("a refused step broadcasts nothing and keeps the residual") {
  const float huge = std::numeric_limits<float>::max();
  Aggregator agg(momentumSgd(), {0.0f, 0.0f, huge}, 1 << 20);
  Membership m;
  push(m, 0, {1.0f, 0.0f, 0.0f});
  agg.step(m, 0);
  push(m, 0, {0.0f, 1.0f, 0.0f});
  agg.step(m, 1);
  const std::vector<float> residual = agg.downloadResidual();
  REQUIRE(residual.size() == 3);
  const std::vector<float> params = agg.parameters();
  push(m, 0, {0.0f, 0.0f, -huge});
  CHECK(agg.step(m, 2).refused);
  CHECK(agg.parameters() == params);
  CHECK(agg.downloadResidual() == residual);
  CHECK(broadcast(agg).empty());
}

TEST_CASE("a restored residual is broadcast later as if there had been no restart") {
  Aggregator agg(momentumSgd(), std::vector<float>(4, 0.0f), 1 << 20);
  Aggregator again(momentumSgd(), std::vector<float>(4, 0.0f), 1 << 20);
  Membership m, m2;
  push(m, 0, unit(4, 0));
  agg.step(m, 0);
  push(m, 0, unit(4, 1));
  agg.step(m, 1);
  again.restore(agg.parameters(), agg.velocity(), agg.downloadResidual());
  push(m, 0, unit(4, 2));
  push(m2, 0, unit(4, 2));
  agg.step(m, 2);
  again.step(m2, 2);
  CHECK(again.parameters() == agg.parameters());
  CHECK(again.downloadResidual() == agg.downloadResidual());
  CHECK(broadcast(again) == broadcast(agg));
}
