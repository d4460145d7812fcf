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
  server::CoordinatorCore core(server::coordinatorOptions(settings), ml::makeModel(settings.model),
                               false, session, now);
  auto join = [&](const std::string& name) {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_join()->set_worker_name(name);
    m.envelope.mutable_join()->set_sample_count(10);
    return core.handleMessage(name, m, 10, now, now).messages;
  };
  const uint32_t a = welcomedId(join("A"), "A");
  const uint32_t b = welcomedId(join("B"), "B");
  const size_t dim = core.parameters().size();

  // A's push does not close the round: acked at once, held for the 2 ms since it arrived.
  auto out =
      core.handleMessage("A", testing::identityPush(session, a, 0, std::vector<float>(dim, 0.1f)),
                         100, now - 0.002, now);
  REQUIRE(!out.messages.empty());
  REQUIRE(out.messages.front().message.envelope.has_ack());
  CHECK(out.messages.front().message.envelope.ack().hold_seconds() == doctest::Approx(0.002));

  // B's push closes it: the ack still goes first. The driver writes the closed round down (the
  // CSV row, the log line: 50 ms) before it sends, and stamps the ack again right before the
  // send, so the round's work is in its hold.
  const double received_at = now;
  out = core.handleMessage("B", testing::identityPush(session, b, 0, std::vector<float>(dim, 0.1f)),
                           100, received_at, now);
  REQUIRE(core.round() == 1);
  REQUIRE(out.closed_rounds.size() == 1);
  REQUIRE(out.messages.size() > 1);
  REQUIRE(out.messages.front().message.envelope.has_ack());
  CHECK(out.messages.front().peer == "B");
  for (size_t i = 0; i < out.closed_rounds.size(); ++i) now += 0.050;
  for (auto& o : out.messages) server::stampAckHold(o.message, received_at, now);
  CHECK(out.messages.front().message.envelope.ack().hold_seconds() == doctest::Approx(0.050));
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
