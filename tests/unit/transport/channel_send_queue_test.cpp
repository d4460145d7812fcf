// What a ROUTER queues for a peer that stops reading is bounded by its send high-water mark,
// which sendQueueFor sizes by the largest message (over inproc: no network, no kernel buffers).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/transport/channel.hpp"

using namespace tern;

TEST_CASE("sendQueueFor holds a peer's queue to about the byte budget, 16 to 1000 messages") {
  CHECK(transport::sendQueueFor(31400 + 4096) == int((8u << 20) / (31400 + 4096)));
  CHECK(transport::sendQueueFor(4 << 20) == 16);  // a million parameters: the floor
  CHECK(transport::sendQueueFor(1000) == 1000);   // tiny models: libzmq's default
  CHECK(transport::sendQueueFor(0) == 1000);
  CHECK(transport::sendQueueFor(1 << 20, 64 << 20) == 64);
}

TEST_CASE("a ROUTER stops queueing for a peer that does not read once its mark is reached") {
  zmq::context_t ctx;
  transport::ChannelOptions o;
  o.send_high_water_mark = transport::sendQueueFor(256 << 10);  // 32 messages of 256 KiB
  REQUIRE(o.send_high_water_mark == 32);
  transport::Channel router(ctx, zmq::socket_type::router, o);
  router.bind("inproc://send-queue");
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::routing_id, "never-reads");
  dealer.set(zmq::sockopt::rcvhwm, 1);
  dealer.connect("inproc://send-queue");
  dealer.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  auto hello = router.receive();
  for (int i = 0; i < 50 && !hello; ++i) {
    router.waitReadable(std::chrono::milliseconds(100));
    hello = router.receive();
  }
  REQUIRE(hello);
  REQUIRE(hello->peer == "never-reads");
  const std::vector<uint8_t> model(256 << 10, 7);
  int queued = 0;
  while (queued < 1000 && router.send("never-reads", "round start", model)) ++queued;
  // The mark on the ROUTER's side plus the one the DEALER's inbound pipe holds.
  CHECK(queued >= o.send_high_water_mark);
  CHECK(queued <= o.send_high_water_mark + 2);
}
