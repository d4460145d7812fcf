#pragma once
// What happened to a socket's security handshakes, for the daemon's logs and counters: ZeroMQ
// reports a refused or failed CURVE handshake only as a socket monitor event (the connection
// itself just retries), so a worker whose key is not allowed would otherwise wait in silence.
#include <cstdint>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace tern::transport {

struct HandshakeEvent {
  // disconnected: a connection that had been made ended (reported only when asked for).
  enum class Kind { succeeded, refused, failed, disconnected };
  Kind kind = Kind::failed;
  uint32_t status = 0;   // refused: the ZAP status code (400: key not allowed)
  std::string endpoint;  // the peer's endpoint as libzmq names it
};

class HandshakeMonitor {
 public:
  // Watches `socket`, which lives in `ctx`; must be created before the socket connects or binds.
  // disconnects: also report connections that end.
  HandshakeMonitor(zmq::context_t& ctx, zmq::socket_t& socket, bool disconnects = false);
  ~HandshakeMonitor();
  HandshakeMonitor(const HandshakeMonitor&) = delete;
  HandshakeMonitor& operator=(const HandshakeMonitor&) = delete;
  // The events reported since the last call, without blocking.
  std::vector<HandshakeEvent> drain();
  zmq::socket_t& socket() { return events_; }

 private:
  zmq::socket_t& watched_;
  zmq::socket_t events_;
};

}  // namespace tern::transport
