#include "common/transport/splice_pipe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace tern::transport {

namespace {

constexpr unsigned kFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;

bool wouldBlock(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

}  // namespace

SplicePipe::SplicePipe(size_t capacity) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  // The kernel rounds up to a power of two pages; past the system's limit the default stays.
  const int got = ::fcntl(write_fd_, F_SETPIPE_SZ, int(capacity));
  capacity_ = got > 0 ? size_t(got) : size_t(::fcntl(write_fd_, F_GETPIPE_SZ));
}

SplicePipe::~SplicePipe() {
  if (read_fd_ >= 0) ::close(read_fd_);
  if (write_fd_ >= 0) ::close(write_fd_);
}

SplicePipe::Moved SplicePipe::fill(int from, size_t limit) {
  const size_t room = capacity_ - held_;
  const size_t want = std::min(limit, room);
  if (want == 0) return {Status::kAgain, 0};
  const ssize_t n = ::splice(from, nullptr, write_fd_, nullptr, want, kFlags);
  if (n > 0) {
    held_ += size_t(n);
    return {Status::kMoved, size_t(n)};
  }
  if (n == 0) return {Status::kClosed, 0};
  if (errno == EINTR || wouldBlock(errno)) return {Status::kAgain, 0};
  return {Status::kFailed, 0};
}

SplicePipe::Moved SplicePipe::drain(int to) {
  size_t moved = 0;
  while (held_ > 0) {
    const ssize_t n = ::splice(read_fd_, nullptr, to, nullptr, held_, kFlags);
    if (n > 0) {
      held_ -= size_t(n);
      moved += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && wouldBlock(errno)) return {Status::kAgain, moved};
    return {Status::kFailed, moved};
  }
  return {Status::kMoved, moved};
}

}  // namespace tern::transport
