// The frame guard in front of a ROUTER on loopback: messages of a DEALER pass both ways
// unchanged; a DEALER that sends a message of more frames than the limit loses its connection
// and the ROUTER never gets that message, while other connections go on.
#include "common/transport/frame_guard.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "common/transport/private_endpoint.hpp"

using namespace tern;

namespace {

// Receives one whole message (waiting up to `ms`); empty when none came.
std::vector<std::string> receiveMessage(zmq::socket_t& s, int ms = 3000) {
  s.set(zmq::sockopt::rcvtimeo, ms);
  std::vector<std::string> parts;
  zmq::message_t m;
  if (!s.recv(m)) return parts;
  parts.push_back(m.to_string());
  s.set(zmq::sockopt::rcvtimeo, 1000);
  while (m.more() && s.recv(m)) parts.push_back(m.to_string());
  return parts;
}

struct Rig {
  zmq::context_t ctx;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  transport::PrivateEndpoint inside;
  transport::FrameGuard guard;
  std::string endpoint;
  explicit Rig(size_t max_frames) : guard(options(max_frames)) {
    router.set(zmq::sockopt::linger, 0);
    router.bind(inside.endpoint());
    endpoint = guard.start("tcp://127.0.0.1:0", inside.endpoint());
  }
  static transport::FrameGuardOptions options(size_t max_frames) {
    transport::FrameGuardOptions o;
    o.limits.max_frames_per_message = max_frames;
    o.buffer_bytes = 4096;  // smaller than the large frame below: relayed in pieces
    return o;
  }
  zmq::socket_t dealer() {
    zmq::socket_t d(ctx, zmq::socket_type::dealer);
    d.set(zmq::sockopt::linger, 0);
    d.connect(endpoint);
    return d;
  }
};

// Sends one message of `frames` empty frames, then waits up to 5 s for the guard to cut it.
void floodAndWait(Rig& rig, zmq::socket_t& d, int frames) {
  for (int i = 1; i < frames; ++i) d.send(zmq::buffer("", 0), zmq::send_flags::sndmore);
  d.send(zmq::buffer("", 0), zmq::send_flags::none);
  for (int i = 0; i < 50 && rig.guard.counts().refused == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

TEST_CASE("messages pass the guard both ways, large frames included") {
  Rig rig(4);
  CHECK(rig.endpoint.rfind("tcp://127.0.0.1:", 0) == 0);
  CHECK(rig.endpoint != "tcp://127.0.0.1:0");
  auto d = rig.dealer();
  const std::string big(100000, 'x');
  d.send(zmq::buffer(std::string("head")), zmq::send_flags::sndmore);
  d.send(zmq::buffer(big), zmq::send_flags::none);
  auto got = receiveMessage(rig.router);
  REQUIRE(got.size() == 3);  // identity, head, payload
  CHECK(got[1] == "head");
  CHECK(got[2] == big);
  rig.router.send(zmq::buffer(got[0]), zmq::send_flags::sndmore);
  rig.router.send(zmq::buffer(big + "back"), zmq::send_flags::none);
  auto back = receiveMessage(d);
  REQUIRE(back.size() == 1);
  CHECK(back[0] == big + "back");
  CHECK(rig.guard.counts().accepted == 1);
  CHECK(rig.guard.counts().refused == 0);
}

TEST_CASE("large messages stream through the guard intact while its buffers grow") {
  // From 4 KiB buffers, each direction doubles up to 256 KiB over the first megabytes: every
  // byte must still arrive in order, both ways, message after message.
  Rig rig(4);
  auto d = rig.dealer();
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char((i * 7 + i / 4093) % 251);
  for (int round = 0; round < 3; ++round) {
    const std::string up = big + std::to_string(round);
    d.send(zmq::buffer(up), zmq::send_flags::none);
    auto got = receiveMessage(rig.router);
    REQUIRE(got.size() == 2);
    CHECK(got[1] == up);
    const std::string down = std::to_string(round) + big;
    rig.router.send(zmq::buffer(got[0]), zmq::send_flags::sndmore);
    rig.router.send(zmq::buffer(down), zmq::send_flags::none);
    auto back = receiveMessage(d);
    REQUIRE(back.size() == 1);
    CHECK(back[0] == down);
  }
  CHECK(rig.guard.counts().refused == 0);
}

TEST_CASE("a message over the frame limit closes its connection before the ROUTER sees it") {
  Rig rig(4);
  auto flooder = rig.dealer();
  floodAndWait(rig, flooder, 10000);
  CHECK(rig.guard.counts().refused == 1);
  CHECK(rig.guard.lastRefusal().rfind("too_many_frames", 0) == 0);
  CHECK(rig.guard.lastRefusal().find("127.0.0.1") != std::string::npos);
  CHECK(receiveMessage(rig.router, 300).empty());

  // The flooder's next message goes over a new connection (libzmq reconnects; the rest of the
  // cut message is dropped on its side), and another peer was never disturbed.
  auto other = rig.dealer();
  other.send(zmq::buffer(std::string("fine")), zmq::send_flags::none);
  flooder.send(zmq::buffer(std::string("again")), zmq::send_flags::none);
  std::set<std::string> seen;
  for (int i = 0; i < 2; ++i) {
    auto got = receiveMessage(rig.router);
    REQUIRE(got.size() == 2);
    seen.insert(got[1]);
  }
  CHECK(seen == std::set<std::string>{"fine", "again"});
}

TEST_CASE("an endpoint the guard cannot listen on is an error with the endpoint in it") {
  transport::FrameGuard guard({});
  transport::PrivateEndpoint here;
  const std::string inside = here.endpoint();
  CHECK_THROWS_WITH_AS(guard.start("ipc:///tmp/x", inside), doctest::Contains("tcp://"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(guard.start("tcp://127.0.0.1:99999", inside), doctest::Contains("port"),
                       std::runtime_error);
}

TEST_CASE("the guard still counts frames after a large frame's body went through its pipe") {
  // A 2 MB body is spliced past the scanner; the flood after it must still be cut, the large
  // message before it delivered whole.
  Rig rig(4);
  auto d = rig.dealer();
  std::string big(2 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char((i * 13 + i / 65521) % 253);
  d.send(zmq::buffer(big), zmq::send_flags::none);
  auto got = receiveMessage(rig.router);
  REQUIRE(got.size() == 2);
  CHECK(got[1] == big);
  floodAndWait(rig, d, 100);
  CHECK(rig.guard.counts().refused == 1);
  CHECK(rig.guard.lastRefusal().rfind("too_many_frames", 0) == 0);
  CHECK(receiveMessage(rig.router, 300).empty());
}

TEST_CASE("without room in the growth budget the guard relays large messages by copying") {
  transport::FrameGuardOptions o = Rig::options(4);
  o.growth_budget_bytes = 0;  // no grown buffer and no pipe
  zmq::context_t ctx;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  router.set(zmq::sockopt::linger, 0);
  transport::PrivateEndpoint here;
  const std::string inside = here.endpoint();
  router.bind(inside);
  transport::FrameGuard guard(o);
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  d.connect(guard.start("tcp://127.0.0.1:0", inside));
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i % 241);
  d.send(zmq::buffer(big), zmq::send_flags::none);
  auto got = receiveMessage(router);
  REQUIRE(got.size() == 2);
  CHECK(got[1] == big);
  router.send(zmq::buffer(got[0]), zmq::send_flags::sndmore);
  router.send(zmq::buffer(big), zmq::send_flags::none);
  auto back = receiveMessage(d);
  REQUIRE(back.size() == 1);
  CHECK(back[0] == big);
}

TEST_CASE("a peer that drops its connection in the middle of a spliced broadcast harms nothing") {
  // splice(2) into a reset TCP connection raises SIGPIPE, whose default ends the process: the
  // guard's thread must never take it. The large messages first grow the link onto its pipe.
  Rig rig(4);
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i % 239);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto d = rig.dealer();
    d.send(zmq::buffer(std::string("hello")), zmq::send_flags::none);
    auto got = receiveMessage(rig.router);
    REQUIRE(got.size() == 2);
    const std::string id = got[0];
    for (int i = 0; i < 3; ++i) {  // read back whole: the down direction streams
      rig.router.send(zmq::buffer(id), zmq::send_flags::sndmore);
      rig.router.send(zmq::buffer(big), zmq::send_flags::none);
      REQUIRE(receiveMessage(d).size() == 1);
    }
    for (int i = 0; i < 6; ++i) {  // not read: the dealer goes with them unread
      rig.router.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      rig.router.send(zmq::buffer(big), zmq::send_flags::dontwait);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    d.close();  // linger 0: unread bytes make the kernel reset the connection
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // Still relaying for a new peer.
  auto fresh = rig.dealer();
  fresh.send(zmq::buffer(std::string("after")), zmq::send_flags::none);
  auto got = receiveMessage(rig.router);
  REQUIRE(got.size() == 2);
  CHECK(got[1] == "after");
}

namespace {

// A raw TCP connection to the guard that sends the NULL greeting and the header of a long frame
// claiming `body` bytes, and nothing of the body.
int claimLargeFrame(const std::string& endpoint, uint64_t body) {
  const auto colon = endpoint.rfind(':');
  const int port = std::stoi(endpoint.substr(colon + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::vector<uint8_t> bytes(64, 0);
  bytes[0] = 0xFF;
  bytes[9] = 0x7F;
  bytes[10] = 3;
  std::memcpy(bytes.data() + 12, "NULL", 4);
  bytes.push_back(0x02);  // a long message frame, the last of its message
  for (int shift = 56; shift >= 0; shift -= 8) bytes.push_back(uint8_t(body >> shift));
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size()));
  return fd;
}

}  // namespace

TEST_CASE("a header claiming a large body gets no pipe: only a body that streams does") {
  // Forty peers each claim a 1 MiB frame and send none of it: without this rule each would hold a
  // pipe and the growth budget (8 MiB) would be theirs. A real large message still streams
  // through a pipe, which its link gives back at the frame's end.
  Rig rig(4);
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) fds.push_back(claimLargeFrame(rig.endpoint, 1 << 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(rig.guard.counts().accepted == 40);
  CHECK(rig.guard.counts().pipes == 0);
  auto d = rig.dealer();
  std::string big(4 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i % 233);
  d.send(zmq::buffer(big), zmq::send_flags::none);
  auto got = receiveMessage(rig.router);
  REQUIRE(got.size() == 2);
  CHECK(got[1] == big);
  CHECK(rig.guard.counts().pipes == 0);  // the up direction's pipe went with its frame
  for (int fd : fds) ::close(fd);
}

TEST_CASE("the ROUTER's socket behind the guard is in a directory only its user can enter") {
  std::string dir;
  {
    transport::PrivateEndpoint inside;
    REQUIRE(inside.endpoint().rfind("ipc:///", 0) == 0);
    const std::string path = inside.endpoint().substr(6);
    dir = path.substr(0, path.rfind('/'));
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    zmq::context_t ctx;
    zmq::socket_t router(ctx, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    router.bind(inside.endpoint());
    CHECK(::access(path.c_str(), F_OK) == 0);
  }
  struct stat gone {};
  CHECK(::stat(dir.c_str(), &gone) != 0);  // removed with the endpoint, socket file and all
}

TEST_CASE("a peer claiming a routing id of libzmq's own form is refused, its own name passes") {
  // libzmq gives its peers a zero byte and a counter; a peer announcing the next such id would
  // make the ROUTER's generated one collide (libzmq aborts) or take a gone peer's place.
  Rig rig(4);
  zmq::socket_t squatter(rig.ctx, zmq::socket_type::dealer);
  squatter.set(zmq::sockopt::linger, 0);
  squatter.set(zmq::sockopt::routing_id, std::string("\0\x6b\x8b\x45\x67", 5));
  squatter.connect(rig.endpoint);
  squatter.send(zmq::buffer(std::string("squat")), zmq::send_flags::none);
  for (int i = 0; i < 50 && rig.guard.counts().refused == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(rig.guard.counts().refused >= 1);
  CHECK(rig.guard.lastRefusal().rfind("reserved_identity", 0) == 0);
  CHECK(receiveMessage(rig.router, 300).empty());

  zmq::socket_t named(rig.ctx, zmq::socket_type::dealer);
  named.set(zmq::sockopt::linger, 0);
  named.set(zmq::sockopt::routing_id, std::string("worker-1"));
  named.connect(rig.endpoint);
  named.send(zmq::buffer(std::string("hello")), zmq::send_flags::none);
  const auto got = receiveMessage(rig.router);
  REQUIRE(got.size() == 2);
  CHECK(got[0] == "worker-1");
  CHECK(got[1] == "hello");
}

namespace {

// A raw TCP connection to the guard (no ZMTP): what an idle peer holds.
int rawConnect(const std::string& endpoint) {
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// Whether the guard closed `fd` within 3 s (a read sees the end of the stream).
bool closedByGuard(int fd) {
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  return ::recv(fd, &c, 1, 0) == 0;
}

}  // namespace

TEST_CASE("past max_connections a new connection is closed at once and counted, others go on") {
  zmq::context_t ctx;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  router.set(zmq::sockopt::linger, 0);
  transport::PrivateEndpoint inside;
  router.bind(inside.endpoint());
  transport::FrameGuardOptions o;
  o.max_connections = 2;
  transport::FrameGuard guard(o);
  const std::string endpoint = guard.start("tcp://127.0.0.1:0", inside.endpoint());
  const int first = rawConnect(endpoint);
  const int second = rawConnect(endpoint);
  for (int i = 0; i < 50 && guard.counts().accepted < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(guard.counts().accepted == 2);
  const int third = rawConnect(endpoint);
  CHECK(closedByGuard(third));
  CHECK(guard.counts().over_limit == 1);
  CHECK(guard.counts().refused == 1);
  CHECK(guard.lastRefusal().rfind("too_many_connections", 0) == 0);
  // A relayed connection that ends makes room: the next one is relayed and its messages pass.
  ::close(first);
  zmq::socket_t d(ctx, zmq::socket_type::dealer);  // libzmq reconnects while it is turned away
  d.set(zmq::sockopt::linger, 0);
  d.set(zmq::sockopt::reconnect_ivl, 50);
  d.connect(endpoint);
  d.send(zmq::buffer(std::string("after")), zmq::send_flags::none);
  const auto got = receiveMessage(router, 5000);
  REQUIRE(got.size() == 2);
  CHECK(got[1] == "after");
  CHECK(guard.counts().accepted >= 3);
  ::close(second);
  ::close(third);
}

TEST_CASE("connectionsWithin leaves the reserve and the pipes' descriptors, three a connection") {
  transport::FrameGuardOptions o;  // 8 MiB of growth over 256 KiB buffers: 32 pipes
  CHECK(transport::mostPipes(o) == 32);
  CHECK(transport::connectionsWithin(8192, o, 256) == (8192 - 256 - 64) / 3);
  CHECK(transport::connectionsWithin(1024, o, 256) == (1024 - 320) / 3);
  CHECK(transport::connectionsWithin(100, o, 256) == 1);
  CHECK(transport::connectionsWithin(323, o, 256) == 1);
  CHECK(transport::connectionsWithin(326, o, 256) == 2);
}
