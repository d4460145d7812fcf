// The coordinator's messages: each builder's envelope parses back to what it was built from.
#include "coordinator_messages.hpp"

#include <doctest/doctest.h>

using namespace tern;

TEST_CASE("an ack, an error, a finish and a heartbeat parse back to what was built") {
  const Message a = proto::ack(
      {.round = 3, .bytes_received = 100, .hold_seconds = 0.25, .probe = true, .probe_id = 9});
  CHECK(a.envelope.version() == wire::PROTOCOL_VERSION);
  const auto ack = proto::parseAck(a);
  REQUIRE(ack);
  CHECK(ack->round == 3);
  CHECK(ack->bytes_received == 100);
  CHECK(ack->hold_seconds == 0.25);
  CHECK(ack->probe);
  CHECK(ack->probe_id == 9);
  CHECK_FALSE(ack->leave);
  CHECK_FALSE(proto::parseError(a));

  const auto e = proto::parseError(
      proto::error({wire::Error::BAD_ROUND, "late", proto::ErrorAbout{4, true, std::nullopt}}));
  REQUIRE(e);
  CHECK(e->code == wire::Error::BAD_ROUND);
  CHECK(e->text == "late");
  REQUIRE(e->about);
  CHECK(e->about->round == 4);
  CHECK(e->about->push);
  CHECK_FALSE(e->about->session);
  CHECK_FALSE(proto::parseError(proto::error({wire::Error::MALFORMED, "x", {}}))->about);

  const auto f = proto::parseFinish(proto::finish({7, 0.5}, {}));
  REQUIRE(f);
  CHECK(f->round == 7);
  CHECK(f->test_accuracy == 0.5);
  CHECK_FALSE(proto::parseFinish(proto::finish({7, std::nullopt}, {}))->test_accuracy);

  // A heartbeat goes both ways; its one builder is in worker_messages.hpp.
  const auto hb = proto::parseHeartbeat(proto::heartbeatMessage({11, 2}, 5));
  REQUIRE(hb);
  CHECK(hb->from.session == 11);
  CHECK(hb->from.worker_id == 2);
  CHECK(hb->round == 5);
}

TEST_CASE("a welcome and a round start carry their body and payload") {
  wire::Welcome w;
  w.set_worker_id(4);
  const Message m = proto::welcome(w, std::vector<uint8_t>{1, 2, 3});
  REQUIRE(proto::parseWelcome(m));
  CHECK(proto::parseWelcome(m)->worker_id() == 4);
  CHECK(m.payload.size() == 3);
  CHECK(proto::parseRoundStart(m) == nullptr);
  wire::RoundStart rs;
  rs.set_round(6);
  rs.set_full_model(true);
  const Message r = proto::roundStart(rs, {});
  REQUIRE(proto::parseRoundStart(r));
  CHECK(proto::parseRoundStart(r)->round() == 6);
  CHECK(proto::parseRoundStart(r)->full_model());
}
