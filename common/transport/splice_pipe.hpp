#pragma once
// A kernel pipe that moves a socket's bytes to another socket without copying them through user
// space (splice(2)): the frame guard's path for the bodies of large frames. Both sockets must be
// non-blocking; no call here ever waits. splice(2) into a socket whose peer is gone raises
// SIGPIPE: the calling thread must block it (drain then fails with kFailed).
#include <sys/types.h>

#include <cstddef>

namespace tern::transport {

class SplicePipe {
 public:
  enum class Status { kMoved, kAgain, kClosed, kFailed };
  struct Moved {
    Status status = Status::kMoved;
    size_t bytes = 0;
  };

  // A pipe of `capacity` bytes (rounded by the kernel); valid() is false when none could be made.
  explicit SplicePipe(size_t capacity);
  ~SplicePipe();
  SplicePipe(const SplicePipe&) = delete;
  SplicePipe& operator=(const SplicePipe&) = delete;

  bool valid() const { return read_fd_ >= 0; }
  size_t capacity() const { return capacity_; }
  size_t held() const { return held_; }  // bytes taken in and not yet passed on

  // Takes up to `limit` bytes from socket `from` (never more than the room left): kMoved with
  // the count, kAgain when it has none now, kClosed at its end, kFailed on an error.
  Moved fill(int from, size_t limit);
  // Passes what the pipe holds to socket `to` until it is empty or `to` is full (kAgain, with
  // what moved before).
  Moved drain(int to);

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  size_t capacity_ = 0;
  size_t held_ = 0;
};

}  // namespace tern::transport
