// The splice pipe between two socket pairs: bytes written into one socket come out of the
// other in order and unchanged; an empty source is "again", a closed one "closed"; a full
// destination leaves the rest in the pipe until it has room.
#include "common/transport/splice_pipe.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

using tern::transport::SplicePipe;
using Status = SplicePipe::Status;

namespace {

struct Pair {
  int a = -1, b = -1;  // a is written by the test, b is the pipe's side
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    a = fds[0];
    b = fds[1];
    ::fcntl(a, F_SETFL, O_NONBLOCK);
    ::fcntl(b, F_SETFL, O_NONBLOCK);
  }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
};

std::string readAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, size_t(n));
  }
}

}  // namespace

TEST_CASE("a splice pipe moves a socket's bytes to another socket unchanged") {
  Pair in, out;
  SplicePipe pipe(64 << 10);
  REQUIRE(pipe.valid());
  CHECK(pipe.capacity() >= (64u << 10));
  CHECK(pipe.fill(in.b, 1000).status == Status::kAgain);  // nothing written yet

  std::string sent(40000, '\0');
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = char((i * 31) % 255);
  REQUIRE(::write(in.a, sent.data(), sent.size()) == ssize_t(sent.size()));
  // At most the limit asked for: the first 1,000 bytes, then the rest.
  const auto first = pipe.fill(in.b, 1000);
  CHECK(first.status == Status::kMoved);
  CHECK(first.bytes == 1000);
  CHECK(pipe.held() == 1000);
  size_t total = first.bytes;
  while (total < sent.size()) {
    const auto m = pipe.fill(in.b, SIZE_MAX);
    REQUIRE(m.status == Status::kMoved);
    total += m.bytes;
  }
  CHECK(pipe.held() == sent.size());
  const auto drained = pipe.drain(out.b);
  CHECK(drained.status == Status::kMoved);
  CHECK(drained.bytes == sent.size());
  CHECK(pipe.held() == 0);
  CHECK(readAll(out.a) == sent);

  ::close(in.a);
  in.a = -1;
  CHECK(pipe.fill(in.b, 1000).status == Status::kClosed);
}

TEST_CASE("a splice pipe keeps what a full socket cannot take until it has room") {
  Pair in, out;
  const int small = 4096;
  ::setsockopt(out.b, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  SplicePipe pipe(1 << 20);
  REQUIRE(pipe.valid());
  std::string sent(pipe.capacity() < (512u << 10) ? pipe.capacity() : (512u << 10), 'q');
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = char((i * 7 + i / 1000) % 250);
  std::string got;
  size_t written = 0;
  while (written < sent.size() || pipe.held() > 0) {
    if (written < sent.size()) {
      const ssize_t n = ::write(in.a, sent.data() + written, sent.size() - written);
      if (n > 0) written += size_t(n);
    }
    const auto f = pipe.fill(in.b, SIZE_MAX);
    REQUIRE(f.status != Status::kFailed);
    const auto d = pipe.drain(out.b);
    REQUIRE(d.status != Status::kFailed);
    if (d.status == Status::kAgain) CHECK(pipe.held() > 0);
    got += readAll(out.a);
  }
  got += readAll(out.a);
  CHECK(got == sent);
}

TEST_CASE("draining into a socket whose peer is gone fails, with SIGPIPE blocked as required") {
  // The frame guard's thread blocks SIGPIPE; so does this one. The drain must say kFailed.
  sigset_t pipe_signal, before;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &pipe_signal, &before) == 0);
  {
    Pair in, out;
    SplicePipe pipe(64 << 10);
    REQUIRE(::write(in.a, "payload", 7) == 7);
    REQUIRE(pipe.fill(in.b, SIZE_MAX).status == Status::kMoved);
    ::close(out.a);
    out.a = -1;
    CHECK(pipe.drain(out.b).status == Status::kFailed);
    // Discard the SIGPIPE left pending on this thread before it is unblocked.
    const timespec none{0, 0};
    while (sigtimedwait(&pipe_signal, nullptr, &none) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}
