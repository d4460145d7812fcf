#pragma once
// The one place in tern that touches ZeroMQ. A Channel is a ROUTER (coordinator) or a DEALER
// (worker) socket that moves multipart messages: [peer identity,] header frame [, payload frame].
// Limits are enforced by libzmq (ZMQ_MAXMSGSIZE) before anything is allocated on our side.
#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tern::transport {

struct ChannelOptions {
  int64_t max_message_bytes = 64 << 20;
  int linger_ms = 200;
  int send_high_water_mark = 1000;
  int reconnect_ivl_ms = 100;
  int reconnect_ivl_max_ms = 2000;
};

struct Frames {
  std::string peer;  // ROUTER identity (empty on a DEALER)
  std::vector<zmq::message_t> parts;
  size_t bytes = 0;  // total bytes of the parts, identity excluded
};

class Channel {
 public:
  Channel(zmq::context_t& ctx, zmq::socket_type type, const ChannelOptions& options);
  // Binds and returns the endpoint actually bound (tcp://127.0.0.1:* resolves to a port).
  std::string bind(const std::string& endpoint);
  void connect(const std::string& endpoint);
  // Sends header [+ payload] to `peer` (ROUTER) or to the connected peer (DEALER).
  // Returns the bytes handed to the socket, or nullopt when it would block (peer gone or full).
  std::optional<size_t> send(const std::string& peer, const std::string& header,
                             std::span<const uint8_t> payload);
  // Waits up to `timeout` for input.
  bool waitReadable(std::chrono::milliseconds timeout);
  // Non-blocking receive of one multipart message.
  std::optional<Frames> receive();
  zmq::socket_t& socket() { return socket_; }

 private:
  zmq::socket_t socket_;
  bool router_;
};

}  // namespace tern::transport
