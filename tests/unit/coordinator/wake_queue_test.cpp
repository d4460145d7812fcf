// WakeQueue against a brute-force reference: after every operation of a seeded random sequence
// of sets, removals and whole replacements, the earliest wake-up is the least of what a plain
// map holds, and the queue holds one entry per id.
#include "server/wake_queue.hpp"

#include <doctest/doctest.h>

#include <map>
#include <random>

using tern::server::WakeQueue;

namespace {

// The least time in `ref` (ties: any id with it), or none.
std::optional<double> least(const std::map<uint32_t, double>& ref) {
  std::optional<double> t;
  for (const auto& [id, at] : ref) {
    if (!t || at < *t) t = at;
  }
  return t;
}

}  // namespace

TEST_CASE("WakeQueue's earliest wake-up is the least of a map's after every operation") {
  std::mt19937 rng(7);
  WakeQueue q;
  std::map<uint32_t, double> ref;
  size_t checked = 0;
  for (int step = 0; step < 20000; ++step) {
    const uint32_t id = rng() % 50;
    const double at = double(rng() % 1000) / 10.0;
    const unsigned op = rng() % 100;
    if (op < 70) {
      q.set(id, at);
      ref[id] = at;
    } else if (op < 98) {
      q.remove(id);
      ref.erase(id);
    } else {
      std::vector<std::pair<uint32_t, double>> all;
      ref.clear();
      for (uint32_t i = 0; i < rng() % 30; ++i) {
        all.emplace_back(i * 3, double(rng() % 1000) / 10.0);
        ref[i * 3] = all.back().second;
      }
      q.assign(all);
    }
    const auto got = q.earliest();
    REQUIRE(got.has_value() == !ref.empty());
    if (got) {
      CHECK(got->second == *least(ref));
      CHECK(ref.at(got->first) == got->second);  // the id named holds that time
    }
    CHECK(q.size() == ref.size());
    ++checked;
  }
  CHECK(checked == 20000);
}

TEST_CASE("WakeQueue keeps the later of an id's times given twice to assign") {
  WakeQueue q;
  q.assign({{1, 5.0}, {2, 7.0}, {1, 9.0}});
  REQUIRE(q.earliest().has_value());
  CHECK(q.earliest()->first == 2);
  CHECK(q.earliest()->second == 7.0);
  CHECK(q.size() == 2);
}

TEST_CASE("WakeQueue's superseded entries do not pile up under many moves of few ids") {
  WakeQueue q;
  for (int i = 0; i < 100000; ++i) q.set(uint32_t(i % 3), double(100000 - i));
  CHECK(q.size() == 3);
  CHECK(q.earliest()->second == 1.0);
  CHECK(q.heapEntries() <= 2 * 3 + 64 + 1);
}
