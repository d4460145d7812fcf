// The ZMTP scanner against byte streams built by hand from the ZMTP 3.0 specification: a NULL
// greeting, a READY command, messages of short and long frames; then every refusal it makes.
#include "common/transport/zmtp_scanner.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

using tern::transport::ZmtpLimits;
using tern::transport::ZmtpScanner;

namespace {

using Bytes = std::vector<uint8_t>;

Bytes greeting(uint8_t major = 3, const char* mechanism = "NULL") {
  Bytes g(64, 0);
  g[0] = 0xFF;
  g[9] = 0x7F;
  g[10] = major;
  g[11] = 1;
  std::memcpy(g.data() + 12, mechanism, std::strlen(mechanism));
  return g;
}

// One frame: flags (0x01 more, 0x04 command; 0x02 added for a long size) and its body.
Bytes frame(uint8_t flags, size_t size, bool force_long = false) {
  Bytes f;
  if (size > 255 || force_long) {
    f.push_back(flags | 0x02);
    for (int shift = 56; shift >= 0; shift -= 8) f.push_back(uint8_t(uint64_t(size) >> shift));
  } else {
    f.push_back(flags);
    f.push_back(uint8_t(size));
  }
  f.insert(f.end(), size, 0xAB);
  return f;
}

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Feeds the stream in chunks of `chunk` bytes (every split point must give the same verdict).
bool feedInChunks(ZmtpScanner& s, const Bytes& stream, size_t chunk) {
  for (size_t i = 0; i < stream.size(); i += chunk) {
    const size_t n = std::min(chunk, stream.size() - i);
    if (!s.feed(std::span<const uint8_t>(stream.data() + i, n))) return false;
  }
  return true;
}

const Bytes kReady = frame(0x04, 30);

}  // namespace

TEST_CASE("a well-formed NULL session passes whatever the chunking, messages counted") {
  const Bytes stream = greeting() + kReady + frame(0x01, 40) + frame(0x00, 1000) + frame(0x00, 3) +
                       frame(0x04, 7) + frame(0x01, 0) + frame(0x00, 5, true);
  for (size_t chunk : {1u, 2u, 7u, 64u, 4096u}) {
    ZmtpScanner s(ZmtpLimits{});
    CHECK(feedInChunks(s, stream, chunk));
    CHECK(s.messages() == 3);
    CHECK(s.reason().empty());
  }
}

TEST_CASE("messages at the frame limit pass and the frame after it is refused") {
  ZmtpLimits limits;
  limits.max_frames_per_message = 4;
  Bytes at_limit = greeting() + kReady;
  for (int i = 0; i < 3; ++i) at_limit = at_limit + frame(0x01, 2);
  at_limit = at_limit + frame(0x00, 2);
  ZmtpScanner ok(limits);
  CHECK(ok.feed(at_limit));
  CHECK(ok.feed(frame(0x01, 0) + frame(0x01, 0) + frame(0x01, 0) + frame(0x00, 0)));
  CHECK(ok.messages() == 2);

  Bytes flood = greeting() + kReady;
  for (int i = 0; i < 100; ++i) flood = flood + frame(0x01, 0);
  ZmtpScanner s(limits);
  CHECK_FALSE(s.feed(flood));
  CHECK(s.reason().rfind("too_many_frames", 0) == 0);
  CHECK_FALSE(s.feed(frame(0x00, 0)));  // refused for good
}

TEST_CASE("commands between frames do not count as frames of the message") {
  ZmtpLimits limits;
  limits.max_frames_per_message = 2;
  ZmtpScanner s(limits);
  CHECK(s.feed(greeting() + kReady + frame(0x01, 1) + frame(0x04, 5) + frame(0x04, 5) +
               frame(0x00, 1)));
  CHECK(s.messages() == 1);
}

TEST_CASE("a frame over the size limit is refused at its size, before its body") {
  ZmtpLimits limits;
  limits.max_frame_bytes = 1000;
  ZmtpScanner s(limits);
  Bytes head = greeting() + kReady;
  head.push_back(0x02);  // a long frame of 2^40 bytes: only its size arrives
  for (int shift = 56; shift >= 0; shift -= 8)
    head.push_back(uint8_t((uint64_t(1) << 40) >> shift));
  CHECK_FALSE(s.feed(head));
  CHECK(s.reason().rfind("frame_too_large", 0) == 0);
  ZmtpScanner command(limits);
  CHECK_FALSE(command.feed(greeting() + frame(0x04, 1001)));
}

TEST_CASE("a message whose frames together pass the message limit is refused at that frame") {
  ZmtpLimits limits;
  limits.max_frame_bytes = 1000;
  limits.max_message_bytes = 2500;
  ZmtpScanner ok(limits);
  // Messages of 2,500, 2,000 and 500 bytes: the count starts again with every message.
  CHECK(ok.feed(greeting() + kReady + frame(0x01, 1000) + frame(0x01, 1000) + frame(0x00, 500) +
                frame(0x01, 1000) + frame(0x00, 1000) + frame(0x00, 500)));
  CHECK(ok.messages() == 3);
  ZmtpScanner s(limits);
  CHECK_FALSE(
      s.feed(greeting() + kReady + frame(0x01, 1000) + frame(0x01, 1000) + frame(0x01, 501)));
  CHECK(s.reason().rfind("message_too_large", 0) == 0);
}

TEST_CASE("anything but ZMTP 3 with the NULL mechanism is refused") {
  const ZmtpLimits limits;
  auto refusedWith = [&](const Bytes& b) {
    ZmtpScanner s(limits);
    return !s.feed(b) && s.reason().rfind("not_zmtp3_null", 0) == 0;
  };
  CHECK(refusedWith(Bytes{0x05, 0x01, 0x41}));  // ZMTP 1.0: length first
  const Bytes g = greeting();
  CHECK(refusedWith(Bytes(g.begin(), g.begin() + 9) + Bytes{0x00}));  // no 0x7F after padding
  CHECK(refusedWith(greeting(2)));                                    // ZMTP 2.0
  CHECK(refusedWith(greeting(3, "CURVE")));
  CHECK(refusedWith(greeting() + Bytes{0x08, 0x00}));  // a reserved flag bit
  CHECK(refusedWith(greeting() + frame(0x05, 1)));     // a command with more
  // The version is refused as soon as it arrives, not only once the greeting is whole.
  ZmtpScanner early(limits);
  const Bytes v1 = greeting(1);
  CHECK_FALSE(early.feed(Bytes(v1.begin(), v1.begin() + 11)));
}

TEST_CASE("body bytes passed on unseen leave the scanner where feeding them would") {
  // A relay that splices a large body tells the scanner how many bytes went by; the frames after
  // it are then checked exactly as in a scanner fed every byte (the reference).
  ZmtpLimits limits;
  limits.max_frames_per_message = 3;
  const Bytes head = greeting() + kReady + frame(0x01, 2);
  const Bytes big = frame(0x01, 5000);  // a long frame: 9 header bytes
  const Bytes last = frame(0x00, 4);
  const Bytes flood = frame(0x01, 0) + frame(0x01, 0) + frame(0x01, 0) + frame(0x01, 0);
  ZmtpScanner reference(limits);
  CHECK(reference.feed(head + big + last));
  CHECK(reference.messages() == 1);
  CHECK_FALSE(reference.feed(flood));

  ZmtpScanner s(limits);
  CHECK(s.bodyLeft() == 0);
  CHECK(s.feed(head + Bytes(big.begin(), big.begin() + 9 + 100)));
  CHECK(s.bodyLeft() == 4900);
  s.passBody(4000);
  CHECK(s.bodyLeft() == 900);
  s.passBody(900);
  CHECK(s.bodyLeft() == 0);
  s.passBody(10);  // nothing left to pass: the next header is still read as one
  CHECK(s.feed(last));
  CHECK(s.messages() == 1);
  CHECK_FALSE(s.feed(flood));
  CHECK(s.reason() == reference.reason());
}

namespace {

// A READY command (ZMTP 3.0: the name, then properties of a 1-byte name length, the name, a
// 4-byte big-endian value length and the value) with the given properties.
Bytes ready(const std::vector<std::pair<std::string, Bytes>>& properties) {
  Bytes body{5, 'R', 'E', 'A', 'D', 'Y'};
  for (const auto& [name, value] : properties) {
    body.push_back(uint8_t(name.size()));
    body.insert(body.end(), name.begin(), name.end());
    for (int shift = 24; shift >= 0; shift -= 8) body.push_back(uint8_t(value.size() >> shift));
    body.insert(body.end(), value.begin(), value.end());
  }
  Bytes f = frame(0x04, body.size());
  std::copy(body.begin(), body.end(), f.end() - long(body.size()));
  return f;
}

const Bytes kDealer{'D', 'E', 'A', 'L', 'E', 'R'};

}  // namespace

TEST_CASE("a READY naming a routing id that starts with a zero byte is refused, any other passes") {
  // libzmq's own ids are a zero byte and a counter: a peer claiming one could collide with the next
  // generated id (libzmq aborts) or take over a gone worker's.
  const Bytes reserved{0x00, 0x6b, 0x8b, 0x45, 0x67};
  for (const std::string name : {"Identity", "identity"}) {
    const Bytes stream =
        greeting() + ready({{"Socket-Type", kDealer}, {name, reserved}}) + frame(0x00, 5);
    for (size_t chunk : {1u, 3u, 4096u}) {
      ZmtpScanner s(ZmtpLimits{});
      CHECK_FALSE(feedInChunks(s, stream, chunk));
      CHECK(s.reason().rfind("reserved_identity:", 0) == 0);
    }
  }
  const Bytes chosen{'w', 'o', 'r', 'k', 'e', 'r', '-', '1'};
  for (const Bytes& id : {Bytes{}, chosen}) {
    ZmtpScanner s(ZmtpLimits{});
    CHECK(feedInChunks(
        s, greeting() + ready({{"Socket-Type", kDealer}, {"Identity", id}}) + frame(0x00, 5), 2));
    CHECK(s.messages() == 1);
  }
  // Only the first command is read: a later one is passed whatever it holds.
  ZmtpScanner later(ZmtpLimits{});
  CHECK(feedInChunks(later,
                     greeting() + ready({{"Socket-Type", kDealer}}) +
                         ready({{"Identity", reserved}}) + frame(0x00, 1),
                     5));
}

TEST_CASE(
    "a READY naming a socket type a ROUTER does not take is refused and DEALER or REQ or ROUTER "
    "pass") {
  for (const std::string type : {"PUB", "SUB", "PUSH", "PAIR", "dealer", "NONSENSE\n"}) {
    ZmtpScanner s(ZmtpLimits{});
    const Bytes value(type.begin(), type.end());
    CHECK_FALSE(feedInChunks(s, greeting() + ready({{"Socket-Type", value}}) + frame(0x00, 1), 3));
    CHECK(s.reason().rfind("bad_socket_type:", 0) == 0);
    CHECK(s.reason().find('\n') == std::string::npos);  // the peer's bytes made printable
  }
  for (const std::string type : {"DEALER", "REQ", "ROUTER"}) {
    ZmtpScanner s(ZmtpLimits{});
    const Bytes value(type.begin(), type.end());
    CHECK(feedInChunks(s, greeting() + ready({{"socket-type", value}}) + frame(0x00, 1), 3));
    CHECK(s.messages() == 1);
  }
}

TEST_CASE("a first command over 4 KiB is refused at its size") {
  ZmtpScanner s(ZmtpLimits{});
  CHECK_FALSE(feedInChunks(s, greeting() + frame(0x04, 4097), 64));
  CHECK(s.reason().rfind("not_zmtp3_null: a first command of 4097 bytes", 0) == 0);
  ZmtpScanner ok(ZmtpLimits{});
  CHECK(feedInChunks(ok, greeting() + ready({{"X-Pad", Bytes(4000, 1)}}) + frame(0x00, 1), 64));
}

TEST_CASE("a first frame that is not a command is refused: libzmq would read it as the READY") {
  // A READY naming a reserved id, sent with the flags of a message frame.
  Bytes smuggled = ready({{"Identity", Bytes{0x00, 1, 2, 3, 4}}});
  smuggled[0] = 0x00;
  ZmtpScanner s(ZmtpLimits{});
  CHECK_FALSE(feedInChunks(s, greeting() + smuggled, 3));
  CHECK(s.reason() == "not_zmtp3_null: the first frame after the greeting is not a command");
}
