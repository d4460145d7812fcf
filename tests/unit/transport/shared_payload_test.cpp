// One payload, many sends: copies of a Payload share its bytes, a write copies them first, and a
// send with an owner hands libzmq the bytes themselves, holding the owner until the frame is done.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "common/transport/framing.hpp"

using namespace tern;

TEST_CASE("payload copies share their bytes and a write to a shared one copies it first") {
  Payload a(std::vector<uint8_t>{1, 2, 3, 4});
  Payload b = a;
  CHECK(b.data() == a.data());
  b.mutableData()[0] = 9;
  CHECK(b.data() != a.data());
  CHECK(a[0] == 1);
  CHECK(b[0] == 9);
  // Alone, a payload writes in place.
  const uint8_t* before = b.data();
  b.mutableData()[1] = 8;
  CHECK(b.data() == before);
  CHECK(b.toVector() == std::vector<uint8_t>{9, 8, 3, 4});
}

TEST_CASE("a shared payload is sent to many peers without a copy and released after") {
  zmq::context_t ctx;
  transport::ChannelOptions opts;
  transport::Channel server(ctx, zmq::socket_type::router, opts);
  const std::string ep = server.bind("inproc://shared-payload");
  const std::vector<std::string> names = {"p0", "p1", "p2"};
  std::vector<std::unique_ptr<transport::Channel>> peers;
  for (const auto& name : names) {
    peers.push_back(std::make_unique<transport::Channel>(ctx, zmq::socket_type::dealer, opts));
    peers.back()->socket().set(zmq::sockopt::routing_id, name);
    peers.back()->connect(ep);
  }
  auto bytes = std::make_shared<const std::vector<uint8_t>>(4096, uint8_t{7});
  std::weak_ptr<const std::vector<uint8_t>> watch = bytes;
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_heartbeat()->set_worker_id(1);
  m.payload = Payload::shared(bytes);
  bytes.reset();
  for (const auto& name : names) REQUIRE(transport::sendMessage(server, name, m));
  m = Message{};
  for (auto& p : peers) {
    REQUIRE(p->waitReadable(std::chrono::milliseconds(2000)));
    auto frames = p->receive();
    REQUIRE(frames);
    auto parsed = transport::parseFrames(*frames);
    REQUIRE(parsed.message);
    CHECK(parsed.message->payload.size() == 4096);
    CHECK(parsed.message->payload[4095] == 7);
    // Over inproc the receiver reads the sender's very bytes: nothing was copied on the way.
    auto held = watch.lock();
    REQUIRE(held);
    CHECK(parsed.message->payload.data() == held->data());
  }
  // Every received payload is gone: nothing holds the shared bytes any more.
  CHECK(watch.expired());
}
