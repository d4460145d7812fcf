#pragma once
// The one place in tern that touches ZeroMQ. A Channel is a ROUTER (coordinator) or a DEALER
// (worker) socket that moves multipart messages: [peer identity,] header frame [, payload frame].
// Frame sizes are limited by libzmq (ZMQ_MAXMSGSIZE, per frame) before anything is allocated on
// our side.
// With CURVE keys the socket encrypts and authenticates every connection (the coordinator's
// ROUTER is the CURVE server, each worker's DEALER a client that knows the server's key).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace tern::transport {

// The most messages a daemon's loop takes from its channel before it runs its timers again.
inline constexpr size_t kMaxMessagesPerTurn = 1000;

// One frame sent or received on any socket, again when a signal lands inside the call (libzmq's
// EINTR: the frame was not taken); false: it would block (or no frame is there).
bool sendFrame(zmq::socket_t& socket, zmq::message_t& frame, zmq::send_flags flags);
bool receiveFrame(zmq::socket_t& socket, zmq::message_t& frame, zmq::recv_flags flags);

// CURVE security of a channel. No secret key: the NULL mechanism (plaintext, no authentication).
struct CurveOptions {
  bool server = false;            // true: accepts clients (their keys are checked by ZAP)
  std::string secret_key;         // Z85: this socket's own secret key
  std::string server_public_key;  // Z85, clients only: the server they expect to talk to
  bool enabled() const { return !secret_key.empty(); }
};

struct ChannelOptions {
  int64_t max_message_bytes = 64 << 20;
  int linger_ms = 200;
  int send_high_water_mark = 1000;  // messages queued per peer (a ROUTER: sendQueueFor)
  int reconnect_ivl_ms = 100;
  int reconnect_ivl_max_ms = 2000;
  // ZMTP heartbeats: a PING after this much quiet, and a connection with no traffic from the
  // peer for heartbeat_timeout_ms after one is dropped (and, on a connecting socket, made again).
  // Without them a path that goes dead without a reset (a lost NAT mapping, a changed address)
  // holds the connection until the kernel gives up retransmitting, about 15 minutes.
  int heartbeat_ivl_ms = 5000;
  int heartbeat_timeout_ms = 30000;
  CurveOptions curve;
};

// A ROUTER's send high-water mark (messages queued per peer) such that a peer that stops reading
// holds about `budget_bytes` of messages as large as `largest_message_bytes` at most: at least 16
// (a worker's burst of probe acknowledgements and round starts), at most 1000 (libzmq's default).
int sendQueueFor(uint64_t largest_message_bytes, uint64_t budget_bytes = 8 << 20);

// The most frames after the identity that a message keeps: an envelope and a payload. The rest
// of a longer message is read and dropped frame by frame, never stored (docs/security.md).
inline constexpr size_t kMaxKeptFrames = 2;

struct Frames {
  std::string peer;                   // ROUTER identity (empty on a DEALER)
  std::vector<zmq::message_t> parts;  // the first kMaxKeptFrames frames
  size_t frame_count = 0;             // every frame the message had, identity excluded
  size_t bytes = 0;                   // total bytes of every frame, identity excluded
  std::string user_id;                // the ZAP user id (a CURVE client's Z85 key), else empty
};

class Channel {
 public:
  Channel(zmq::context_t& ctx, zmq::socket_type type, const ChannelOptions& options);
  // Binds and returns the endpoint actually bound (tcp://127.0.0.1:* resolves to a port).
  std::string bind(const std::string& endpoint);
  void connect(const std::string& endpoint);
  // Drops the connection made by connect() and starts a new one. ZeroMQ gives up on a connection
  // whose security handshake failed (e.g. a key not yet on the server's allowlist); the daemon
  // calls this to try again later.
  void reconnect();
  // Sends header [+ payload] to `peer` (ROUTER) or to the connected peer (DEALER).
  // Returns the bytes handed to the socket, or nullopt when it would block (peer gone or full).
  // With `owner` (what keeps the payload's bytes alive) the payload is not copied: libzmq sends
  // from those bytes and releases its reference to owner when the frame is on the wire.
  std::optional<size_t> send(const std::string& peer, const std::string& header,
                             std::span<const uint8_t> payload,
                             std::shared_ptr<const void> owner = nullptr);
  // Waits up to `timeout` for input on this channel or on any of `also` (e.g. the ZAP handler);
  // returns whether this channel is readable.
  bool waitReadable(std::chrono::milliseconds timeout, std::span<zmq::socket_t* const> also = {});
  // Non-blocking receive of one multipart message, frame by frame: at most kMaxKeptFrames stored.
  std::optional<Frames> receive();
  zmq::socket_t& socket() { return socket_; }

 private:
  // The next frame of a message being read (it is there whole); false if none.
  bool nextPart(zmq::message_t& part);
  zmq::socket_t socket_;
  bool router_;
  std::string connected_;  // the endpoint given to connect()
};

}  // namespace tern::transport
