// A Channel reads a multipart message frame by frame: whatever the number of frames a peer sends
// in one message, at most an envelope and a payload are kept, the message is refused as a bad
// frame count, and the next message is read as usual (over inproc: no network).
#include <doctest/doctest.h>

#include <string>

#include "common/transport/channel.hpp"
#include "common/transport/framing.hpp"

using namespace tern;

namespace {

// Waits (up to 5 s) for a message on the channel.
std::optional<transport::Frames> receiveOne(transport::Channel& ch) {
  for (int i = 0; i < 50; ++i) {
    if (auto f = ch.receive()) return f;
    ch.waitReadable(std::chrono::milliseconds(100));
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a message of 100,000 empty frames is counted and refused, and only two frames kept") {
  zmq::context_t ctx;
  transport::Channel router(ctx, zmq::socket_type::router, {});
  router.bind("inproc://many-frames");
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.connect("inproc://many-frames");
  constexpr size_t kFrames = 100000;
  for (size_t i = 0; i + 1 < kFrames; ++i)
    dealer.send(zmq::buffer("", 0), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer("", 0), zmq::send_flags::none);
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_heartbeat()->set_worker_id(5);
  const std::string head = m.envelope.SerializeAsString();
  dealer.send(zmq::buffer(head), zmq::send_flags::none);

  auto flood = receiveOne(router);
  REQUIRE(flood);
  CHECK(flood->frame_count == kFrames);
  CHECK(flood->parts.size() == transport::kMaxKeptFrames);
  CHECK(flood->bytes == 0);
  CHECK_FALSE(flood->peer.empty());
  CHECK(flood->user_id.empty());  // no ZAP on this socket
  auto refused = transport::parseFrames(*flood);
  CHECK_FALSE(refused.message);
  CHECK(refused.reason == "bad_frame_count");
  CHECK(refused.error == "expected 1 or 2 frames, got " + std::to_string(kFrames));

  // The next message from the same peer is read whole and parses.
  auto next = receiveOne(router);
  REQUIRE(next);
  CHECK(next->frame_count == 1);
  CHECK(next->peer == flood->peer);
  auto parsed = transport::parseFrames(*next);
  REQUIRE(parsed.message);
  CHECK(parsed.message->envelope.heartbeat().worker_id() == 5);
}
