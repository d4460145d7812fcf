#pragma once
// The frame guard: the plaintext coordinator's TCP listener. It accepts each connection itself,
// relays its bytes to the ROUTER's private endpoint (a unix socket in a directory only this user
// can reach: PrivateEndpoint) and back, and reads what the peer sends with a ZmtpScanner: a
// connection that sends a message of more frames than a tern message has, an oversized frame, or
// anything but ZMTP 3 with the NULL mechanism is closed at once, so libzmq never holds more than
// ZmtpLimits::max_frames_per_message frames of one peer's message (libzmq itself buffers a
// multipart message whole, with no limit on its frames). It runs one Boost.Asio thread; each
// connection costs two relay buffers. docs/security.md, "What one peer can make the coordinator
// hold".
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/transport/zmtp_scanner.hpp"

namespace tern::transport {

struct FrameGuardOptions {
  ZmtpLimits limits;
  size_t buffer_bytes = 16 << 10;  // per direction and connection, to start with
  // A direction that streams (kGrowAfterFullReads reads in a row filled its buffer) doubles its
  // buffer, up to this: fewer system calls for large messages, small ones keep the small buffer.
  size_t max_buffer_bytes = 256 << 10;
  // What all connections' grown buffers may add together, so that a fleet's bursts (every
  // worker's calibration probes at once) do not grow every connection; a closed connection gives
  // its growth back.
  size_t growth_budget_bytes = 8 << 20;
  // Connections relayed at once (0: no limit). Past it a new connection is closed as soon as it
  // is accepted and counted as refused: each relayed connection costs three file descriptors
  // (its TCP socket and the guard's and libzmq's ends of the unix socket), and libzmq ends the
  // process when it cannot accept on its unix socket (connectionsWithin sizes this).
  size_t max_connections = 0;
};

// Growth buffers' splice pipes at most (two descriptors each): growth_budget_bytes over
// max_buffer_bytes.
size_t mostPipes(const FrameGuardOptions& o);

// How many connections the guard may relay with `descriptors` file descriptors (the soft
// RLIMIT_NOFILE): three each, after its pipes' and `reserve` (the rest of the process: libzmq's
// own, the telemetry server's, files). At least 1.
size_t connectionsWithin(uint64_t descriptors, const FrameGuardOptions& o, uint64_t reserve);

class FrameGuard {
 public:
  struct Counts {
    uint64_t accepted = 0;  // connections relayed
    uint64_t refused = 0;   // connections closed for what they sent
    uint64_t pipes = 0;     // kernel pipes the links hold now (large frames, streaming broadcasts)
    uint64_t over_limit = 0;  // of refused: closed at once, max_connections already relayed
  };

  explicit FrameGuard(const FrameGuardOptions& options);
  ~FrameGuard();  // stops accepting, closes every connection, joins the thread
  FrameGuard(const FrameGuard&) = delete;
  FrameGuard& operator=(const FrameGuard&) = delete;

  // Listens on `endpoint` (tcp://HOST:PORT; HOST an address, `*` or a host name, PORT a number,
  // 0 or `*`) and relays every connection to `inside` (ipc://PATH where the ROUTER is bound, a
  // PrivateEndpoint's; ipc://@NAME for an abstract socket); returns the endpoint listened on, its
  // port resolved. Throws std::runtime_error when it cannot listen. Starts the guard's thread.
  std::string start(const std::string& endpoint, const std::string& inside);
  Counts counts() const;
  // The latest refusal ("too_many_frames: ...") with the peer's address; empty before any.
  std::string lastRefusal() const;

  struct State;  // the Asio side, shared with the connections

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tern::transport
