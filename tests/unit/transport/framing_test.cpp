// Frames from a socket to a message: one envelope frame and at most one payload frame. Anything
// else is refused with one of three fixed reasons (the keys rejections are counted under).
#include "common/transport/framing.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace tern;

namespace {

transport::Frames framesOf(const std::vector<std::string>& parts) {
  transport::Frames f;
  for (const auto& p : parts) {
    f.parts.emplace_back(p.data(), p.size());
    f.bytes += p.size();
  }
  return f;
}

}  // namespace

TEST_CASE("frames parse into a message or are refused under a fixed reason") {
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_heartbeat()->set_worker_id(3);
  const std::string head = m.envelope.SerializeAsString();

  auto two = framesOf({head, "xyz"});
  auto ok = transport::parseFrames(two);
  REQUIRE(ok.message);
  CHECK(ok.message->envelope.heartbeat().worker_id() == 3);
  CHECK(std::string(ok.message->payload.begin(), ok.message->payload.end()) == "xyz");

  for (size_t n : {0u, 3u, 7u}) {
    CAPTURE(n);
    auto f = framesOf(std::vector<std::string>(n, head));
    auto p = transport::parseFrames(f);
    CHECK_FALSE(p.message);
    CHECK(p.reason == "bad_frame_count");
    CHECK(p.error == "expected 1 or 2 frames, got " + std::to_string(n));
  }
  auto big = framesOf({std::string(transport::kMaxEnvelopeBytes + 1, '\0')});
  auto p = transport::parseFrames(big);
  CHECK_FALSE(p.message);
  CHECK(p.reason == "envelope_too_large");
  auto junk = framesOf({"\xff\xff\xff"});
  p = transport::parseFrames(junk);
  CHECK_FALSE(p.message);
  CHECK(p.reason == "envelope_unparseable");
}
