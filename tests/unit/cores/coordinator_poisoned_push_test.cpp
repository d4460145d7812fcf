// A poisoned push through the coordinator core: one member of four declares 2^40 samples at its
// join and pushes values of 1e6. The model moves by a bounded step, and the member's clipped push
// is counted in its record (what /status shows) and in the run's counter.
#include <doctest/doctest.h>

#include <cmath>

#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

TEST_CASE(
    "a push of 1e6 values from a member claiming 2^40 samples moves the model a bounded step") {
  Harness h;
  h.settings.min_workers = 4;
  h.settings.optimizer.lr = 0.1;
  h.withTimers(10.0, 100.0);
  std::vector<uint32_t> ids;
  for (const char* name : {"a", "b", "c"}) ids.push_back(idOf(h.join(name, name, 100), name));
  const uint32_t bad = idOf(h.join("X", "x", uint64_t{1} << 40), "X");
  const std::vector<float> before = h.core->parameters();
  const size_t d = before.size();
  const float honest = float(1.0 / std::sqrt(double(d)));  // a push of norm 1
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string peer(1, char('a' + i));
    h.core->onMessage(peer, h.push(ids[i], 0, std::vector<float>(d, honest)), 50, h.now);
  }
  h.core->onMessage("X", h.push(bad, 0, std::vector<float>(d, 1e6f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  double moved = 0.0;
  for (size_t j = 0; j < d; ++j) {
    const double step = double(h.core->parameters()[j]) - double(before[j]);
    moved += step * step;
  }
  // Weight capped at 0.5 (four pushers), norm clipped to 10 x the median of 1: at most
  // lr x (0.5 x 10 + 0.5 x 1); the weighted sum of before moved it by about lr x 1e6 x sqrt(d).
  CHECK(std::sqrt(moved) <= 0.1 * (0.5 * 10.0 + 0.5 * 1.0) * (1.0 + 1e-5));
  CHECK(recordOf(*h.core, bad).pushes_clipped == 1);
  CHECK(recordOf(*h.core, ids[0]).pushes_clipped == 0);
  CHECK(h.core->pushesClipped() == 1);
}
