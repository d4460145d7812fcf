// The hold time in the coordinator's ack: the worker subtracts it from the ack's round trip to
// get its link time, so it must cover everything the coordinator did between receiving a push
// and handing the ack to the socket, including closing the round the push completed.
#include <doctest/doctest.h>

#include "push_message.hpp"
#include "server/coordinator_core.hpp"

using namespace tern;

namespace {

uint32_t welcomedId(const std::vector<Outgoing>& out, const std::string& peer) {
  for (const auto& o : out)
    if (o.peer == peer && o.message.envelope.has_welcome())
      return o.message.envelope.welcome().worker_id();
  FAIL("no welcome for " << peer);
  return 0;
}

}  // namespace

TEST_CASE("the ack of the push that closes a round holds the round's work in its hold time") {
  double now = 10.0;
  config::CoordinatorSettings settings;
  settings.min_workers = 2;
  settings.max_rounds = 10;
  settings.model.kind = "softmax";
  settings.model.features = 3;
  settings.model.classes = 2;
  settings.allocation.budget.mean_ratio = 0.5;
  const uint64_t session = 5;
  server::CoordinatorCore core(settings, ml::makeModel(settings.model), nullptr, session,
                               [&now] { return now; });
  // Closing a round takes 50 ms of (clock) time: evaluation, the CSV row, the log line.
  core.on_round = [&now](const server::RoundRecord&) { now += 0.050; };
  auto join = [&](const std::string& name) {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_join()->set_worker_name(name);
    m.envelope.mutable_join()->set_sample_count(10);
    return core.onMessage(name, m, 10, now);
  };
  const uint32_t a = welcomedId(join("A"), "A");
  const uint32_t b = welcomedId(join("B"), "B");
  const size_t dim = core.parameters().size();

  // A's push does not close the round: acked at once, held for the 2 ms since it arrived.
  auto out = core.onMessage(
      "A", testing::identityPush(session, a, 0, std::vector<float>(dim, 0.1f)), 100, now - 0.002);
  REQUIRE(!out.empty());
  REQUIRE(out.front().message.envelope.has_ack());
  CHECK(out.front().message.envelope.ack().hold_seconds() == doctest::Approx(0.002));

  // B's push closes it: the ack still goes first, with the round's 50 ms in its hold.
  out = core.onMessage("B", testing::identityPush(session, b, 0, std::vector<float>(dim, 0.1f)),
                       100, now);
  REQUIRE(core.round() == 1);
  REQUIRE(out.size() > 1);
  REQUIRE(out.front().message.envelope.has_ack());
  CHECK(out.front().peer == "B");
  CHECK(out.front().message.envelope.ack().hold_seconds() == doctest::Approx(0.050));
}

TEST_CASE(
    "a daemon re-stamps the hold right before the send, and leaves other messages untouched") {
  Message ack;
  ack.envelope = makeEnvelope();
  ack.envelope.mutable_ack()->set_hold_seconds(0.001);
  server::stampAckHold(ack, 3.0, 3.25);
  CHECK(ack.envelope.ack().hold_seconds() == doctest::Approx(0.25));
  server::stampAckHold(ack, 3.0, 2.0);  // a clock read before the receive: never negative
  CHECK(ack.envelope.ack().hold_seconds() == 0.0);

  Message hb;
  hb.envelope = makeEnvelope();
  hb.envelope.mutable_heartbeat()->set_round(7);
  const std::string before = hb.envelope.SerializeAsString();
  server::stampAckHold(hb, 3.0, 3.25);
  CHECK(hb.envelope.SerializeAsString() == before);
}
