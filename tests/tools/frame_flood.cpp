// tern-frame-flood: an unauthenticated peer that sends a coordinator one multipart message of
// many empty frames (2 bytes each on the wire), written as raw ZMTP 3 over its own TCP socket so
// that the flood costs this program nothing, and then, over a new ZeroMQ connection, one heartbeat
// of an unknown session. The flood is either cut (the coordinator's frame guard closes the
// connection) or refused (a MALFORMED bad_frame_count answer); the heartbeat's UNKNOWN_SESSION
// answer shows the coordinator kept serving. Exit 0 when both happened, 1 otherwise.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "message.hpp"

using namespace tern;

namespace {

using Clock = std::chrono::steady_clock;

// Connects a TCP socket to tcp://HOST:PORT (IPv4); -1 on failure.
int connectTcp(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (endpoint.rfind("tcp://", 0) != 0 || colon == std::string::npos) return -1;
  const std::string host = endpoint.substr(6, colon - 6), port = endpoint.substr(colon + 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  return fd;
}

bool sendAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// False at the connection's end (errno 0 or the error) or a receive timeout (errno EAGAIN).
bool recvAll(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, 0);
    if (r == 0) errno = 0;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

// ZMTP 3.0, NULL mechanism, as a DEALER: the greeting both ways, then our READY.
bool handshake(int fd) {
  uint8_t greeting[64] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 0, 'N', 'U', 'L', 'L'};
  uint8_t theirs[64];
  if (!sendAll(fd, greeting, sizeof greeting) || !recvAll(fd, theirs, sizeof theirs)) return false;
  const std::string body =
      std::string("\x05READY") + "\x0bSocket-Type" + std::string("\x00\x00\x00\x06", 4) + "DEALER";
  std::vector<uint8_t> ready{0x04, uint8_t(body.size())};
  ready.insert(ready.end(), body.begin(), body.end());
  return sendAll(fd, ready.data(), ready.size());
}

// Writes `frames` empty frames as one message; false when the peer closed the connection first.
bool flood(int fd, size_t frames) {
  std::vector<uint8_t> chunk(1 << 16);
  for (size_t i = 0; i < chunk.size(); i += 2) chunk[i] = 0x01;  // more, size 0
  size_t left = frames - 1;
  while (left > 0) {
    const size_t n = std::min(left, chunk.size() / 2);
    if (!sendAll(fd, chunk.data(), 2 * n)) return false;
    left -= n;
  }
  const uint8_t last[2] = {0x00, 0x00};
  return sendAll(fd, last, 2);
}

enum class Answer { kRefused, kClosed, kSilent };

// Reads the coordinator's frames until a MALFORMED bad_frame_count error, the connection's end
// (a cut: closed or reset), or silence until the deadline.
Answer readAnswer(int fd, Clock::time_point deadline) {
  auto ended = [] { return errno != EAGAIN && errno != EWOULDBLOCK; };
  while (Clock::now() < deadline) {
    errno = 0;
    uint8_t head[9];
    if (!recvAll(fd, head, 1)) {
      if (ended()) return Answer::kClosed;
      continue;
    }
    const size_t width = (head[0] & 0x02) ? 8 : 1;
    if (!recvAll(fd, head + 1, width)) return ended() ? Answer::kClosed : Answer::kSilent;
    uint64_t size = 0;
    for (size_t i = 1; i <= width; ++i) size = (size << 8) | head[i];
    if (size > (1u << 20)) return Answer::kSilent;
    std::string body(size, '\0');
    if (!recvAll(fd, reinterpret_cast<uint8_t*>(body.data()), size)) {
      return ended() ? Answer::kClosed : Answer::kSilent;
    }
    wire::Envelope e;
    if ((head[0] & 0x04) || !e.ParseFromString(body) || !e.has_error()) continue;
    if (e.error().code() == wire::Error::MALFORMED &&
        e.error().text().find("bad_frame_count") != std::string::npos) {
      return Answer::kRefused;
    }
  }
  return Answer::kSilent;
}

// A heartbeat of an unknown session over a fresh libzmq connection: answered UNKNOWN_SESSION?
bool heartbeatAnswered(const std::string& endpoint, Clock::time_point deadline) {
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 200);
  s.connect(endpoint);
  Message hb;
  hb.envelope = makeEnvelope();
  hb.envelope.mutable_heartbeat()->set_session(0xdeadbeef);
  s.send(zmq::buffer(hb.envelope.SerializeAsString()), zmq::send_flags::none);
  while (Clock::now() < deadline) {
    zmq::message_t reply;
    if (!s.recv(reply)) continue;
    wire::Envelope e;
    if (e.ParseFromArray(reply.data(), int(reply.size())) && e.has_error() &&
        e.error().code() == wire::Error::UNKNOWN_SESSION) {
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string endpoint;
  size_t frames = 4u << 20;
  double timeout_s = 60.0;
  CLI::App app{"Send one message of many empty frames to a coordinator and see it survive"};
  app.add_option("--endpoint", endpoint, "coordinator endpoint (tcp://HOST:PORT)")->required();
  app.add_option("--frames", frames, "empty frames in the one message")
      ->check(CLI::Range(1ul, 1ul << 40));
  app.add_option("--timeout", timeout_s, "give up waiting for the answers after this many seconds");
  CLI11_PARSE(app, argc, argv);
  const auto start = Clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  const int fd = connectTcp(endpoint);
  if (fd < 0 || !handshake(fd)) {
    std::cout << "frame-flood: cannot connect or handshake with " << endpoint << "\n";
    return 1;
  }
  const bool sent = flood(fd, frames);
  const Answer answer = sent ? readAnswer(fd, deadline) : Answer::kClosed;
  const char* outcome = answer == Answer::kClosed    ? "cut"
                        : answer == Answer::kRefused ? "refused"
                                                     : "unanswered";
  close(fd);
  const bool heartbeat = heartbeatAnswered(endpoint, deadline);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << "frame-flood: frames=" << frames << " flood=" << outcome
            << " heartbeat_refused=" << heartbeat << " seconds=" << seconds << "\n";
  return std::string(outcome) != "unanswered" && heartbeat ? 0 : 1;
}
