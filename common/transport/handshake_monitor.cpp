#include "common/transport/handshake_monitor.hpp"

#include <atomic>
#include <cstring>

#include "common/transport/channel.hpp"

namespace tern::transport {
namespace {

constexpr int kWatchedEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;

std::string uniqueEndpoint() {
  static std::atomic<uint64_t> next{0};
  return "inproc://tern-handshake-monitor-" + std::to_string(next++);
}

}  // namespace

HandshakeMonitor::HandshakeMonitor(zmq::context_t& ctx, zmq::socket_t& socket, bool disconnects)
    : watched_(socket), events_(ctx, zmq::socket_type::pair) {
  const std::string endpoint = uniqueEndpoint();
  const int events = kWatchedEvents | (disconnects ? ZMQ_EVENT_DISCONNECTED : 0);
  if (zmq_socket_monitor(socket.handle(), endpoint.c_str(), events) != 0) {
    throw zmq::error_t();
  }
  events_.set(zmq::sockopt::linger, 0);
  events_.connect(endpoint);
}

HandshakeMonitor::~HandshakeMonitor() { zmq_socket_monitor(watched_.handle(), nullptr, 0); }

std::vector<HandshakeEvent> HandshakeMonitor::drain() {
  std::vector<HandshakeEvent> out;
  while (true) {
    zmq::message_t head, address;
    if (!receiveFrame(events_, head, zmq::recv_flags::dontwait)) break;
    // A monitor event is two frames: 16-bit event and 32-bit value, then the endpoint.
    if (head.more()) (void)receiveFrame(events_, address, zmq::recv_flags::none);
    if (head.size() < 6) continue;
    uint16_t event;
    uint32_t value;
    std::memcpy(&event, head.data(), sizeof event);
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, sizeof value);
    HandshakeEvent e;
    e.endpoint = address.to_string();
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      e.kind = HandshakeEvent::Kind::succeeded;
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
      e.kind = HandshakeEvent::Kind::disconnected;
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      e.kind = HandshakeEvent::Kind::refused;
      e.status = value;
    } else {
      e.kind = HandshakeEvent::Kind::failed;
      e.status = value;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tern::transport
