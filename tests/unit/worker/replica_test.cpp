// Replica: updates applied exactly as the coordinator applies them, refused whole when bad.
#include "worker/replica.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/compression/codec.hpp"
#include "common/util/checksum.hpp"

using namespace tern;
using worker::Replica;

namespace {

std::vector<uint8_t> update(std::vector<float> v) {
  compression::SparseGradient g;
  g.dim = uint32_t(v.size());
  g.values = std::move(v);
  return compression::encodeUpdate(g);
}

wire::RoundStart roundStart(uint64_t round, bool full = false) {
  wire::RoundStart rs;
  rs.set_round(round);
  rs.set_full_model(full);
  return rs;
}

}  // namespace

TEST_CASE("a round's update is added to the replica, one that skips a round asks for a re-join") {
  Replica r(1 << 20);
  r.reset({1.0f, 2.0f}, 3);
  std::string error;
  CHECK(r.takeRoundModel(roundStart(4), update({0.5f, -1.0f}), error) == Replica::Sync::done);
  CHECK(r.params() == std::vector<float>{1.5f, 1.0f});
  CHECK(r.round() == 4);
  CHECK(r.takeRoundModel(roundStart(6), update({1.0f, 1.0f}), error) == Replica::Sync::rejoin);
  CHECK(r.takeRoundModel(roundStart(5), {}, error) == Replica::Sync::rejoin);
  CHECK(r.takeRoundModel(roundStart(4), {}, error) == Replica::Sync::done);  // nothing to apply
  CHECK(r.params() == std::vector<float>{1.5f, 1.0f});
}

TEST_CASE(
    "parameters lent to a trainer stay as lent, and an unheld replica takes an update in place") {
  Replica r(1 << 20);
  r.reset({1.0f, 2.0f, 3.0f}, 0);
  std::string error;
  const float* buffer = r.params().data();
  {
    const auto lent = r.lend();
    CHECK(lent->data() == buffer);  // the parameters themselves, not a copy
    CHECK(r.takeRoundModel(roundStart(1), update({1.0f, 1.0f, 1.0f}), error) ==
          Replica::Sync::done);
    CHECK(*lent == std::vector<float>{1.0f, 2.0f, 3.0f});
    CHECK(r.params() == std::vector<float>{2.0f, 3.0f, 4.0f});
    CHECK(r.params().data() != lent->data());
  }
  // Nobody holds them now: the next update changes the same buffer.
  buffer = r.params().data();
  CHECK(r.takeRoundModel(roundStart(2), update({-1.0f, 0.5f, 0.0f}), error) == Replica::Sync::done);
  CHECK(r.params().data() == buffer);
  CHECK(r.params() == std::vector<float>{1.0f, 3.5f, 4.0f});
  // A Finish's update too: lent, then taken.
  const auto lent = r.lend();
  CHECK(r.takeFinal(3, update({1.0f, 1.0f, 1.0f}), false, error));
  CHECK(*lent == std::vector<float>{1.0f, 3.5f, 4.0f});
  CHECK(r.params() == std::vector<float>{2.0f, 4.5f, 5.0f});
}

TEST_CASE("an update that would make the replica non-finite is refused and changes nothing") {
  Replica r(1 << 20);
  const float big = std::numeric_limits<float>::max();
  r.reset({big, 0.0f}, 0);
  std::string error;
  CHECK(r.takeRoundModel(roundStart(1), update({big, 0.0f}), error) == Replica::Sync::refused);
  CHECK(r.round() == 0);
  CHECK(r.params() == std::vector<float>{big, 0.0f});
  CHECK_FALSE(error.empty());
}

TEST_CASE("a dense update with a NaN in its frame is refused and changes nothing") {
  // Added from its frame, not decoded first: the check must still come before any change.
  Replica r(1 << 20);
  r.reset({1.0f, 2.0f, 3.0f}, 0);
  auto bytes = update({1.0f, 1.0f, 1.0f});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + bytes.size() - 4, &nan, 4);  // the last coordinate
  std::string error;
  CHECK(r.takeRoundModel(roundStart(1), bytes, error) == Replica::Sync::refused);
  CHECK(r.round() == 0);
  CHECK(r.params() == std::vector<float>{1.0f, 2.0f, 3.0f});
  CHECK(error.find("non-finite") != std::string::npos);
  // Truncated by one byte: refused as well.
  auto cut = update({1.0f, 1.0f, 1.0f});
  cut.pop_back();
  CHECK(r.takeRoundModel(roundStart(1), cut, error) == Replica::Sync::refused);
  CHECK(r.params() == std::vector<float>{1.0f, 2.0f, 3.0f});
}

TEST_CASE("a welcome without the model is taken only on the replica the join named") {
  Replica r(1 << 20);
  r.reset({1.0f, 2.0f}, 5);
  const auto named = r.announce();
  REQUIRE(named.has_value());
  CHECK(named->first == 5);
  CHECK(named->second == checksum(r.params()));
  wire::Welcome w;
  w.set_model_payload(wire::Welcome::REPLICA_UPDATE);
  w.set_round(6);
  std::string error;
  const auto params = r.fromWelcome(w, update({1.0f, 1.0f}), 2, error);
  REQUIRE(params.has_value());
  CHECK(*params == std::vector<float>{2.0f, 3.0f});
  w.set_round(7);
  CHECK_FALSE(r.fromWelcome(w, update({1.0f, 1.0f}), 2, error).has_value());
  CHECK_FALSE(r.fromWelcome(w, {}, 3, error).has_value());  // another model's size
  Replica none(1 << 20);
  CHECK_FALSE(none.announce().has_value());
}

TEST_CASE("the Finish's update is taken only when it follows the replica's round") {
  Replica r(1 << 20);
  r.reset({1.0f}, 2);
  std::string error;
  CHECK(r.takeFinal(4, update({1.0f}), false, error));  // not the next round: left as it is
  CHECK(r.round() == 2);
  CHECK(r.takeFinal(3, update({1.0f}), false, error));
  CHECK(r.round() == 3);
  CHECK(r.params() == std::vector<float>{2.0f});
}

TEST_CASE("a Finish with the whole model brings a replica rounds behind to the final model") {
  Replica r(1 << 20);
  r.reset({1.0f, 2.0f}, 2);
  std::string error;
  const std::vector<float> final_model{0.25f, -3.0f};
  CHECK(r.takeFinal(9, floatsToBytes(final_model), true, error));
  CHECK(r.round() == 9);
  CHECK(r.params() == final_model);
  // A whole model of the wrong size or not finite is refused, the replica left as it was.
  CHECK_FALSE(r.takeFinal(10, floatsToBytes(std::vector<float>{1.0f}), true, error));
  CHECK(error.find("wrong size") != std::string::npos);
  CHECK_FALSE(r.takeFinal(10, floatsToBytes(std::vector<float>{1.0f, std::nanf("")}), true, error));
  CHECK(r.round() == 9);
  CHECK(r.params() == final_model);
}
