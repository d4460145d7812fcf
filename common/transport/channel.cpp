#include "common/transport/channel.hpp"

#include <algorithm>

#include "common/transport/curve_keys.hpp"

namespace tern::transport {

bool sendFrame(zmq::socket_t& socket, zmq::message_t& frame, zmq::send_flags flags) {
  for (;;) {
    try {
      return bool(socket.send(frame, flags));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

bool receiveFrame(zmq::socket_t& socket, zmq::message_t& frame, zmq::recv_flags flags) {
  for (;;) {
    try {
      return bool(socket.recv(frame, flags));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

int sendQueueFor(uint64_t largest_message_bytes, uint64_t budget_bytes) {
  const uint64_t fits = budget_bytes / std::max<uint64_t>(largest_message_bytes, 1);
  return int(std::clamp<uint64_t>(fits, 16, 1000));
}

Channel::Channel(zmq::context_t& ctx, zmq::socket_type type, const ChannelOptions& options)
    : socket_(ctx, type), router_(type == zmq::socket_type::router) {
  socket_.set(zmq::sockopt::maxmsgsize, options.max_message_bytes);
  socket_.set(zmq::sockopt::linger, options.linger_ms);
  socket_.set(zmq::sockopt::sndhwm, options.send_high_water_mark);
  socket_.set(zmq::sockopt::reconnect_ivl, options.reconnect_ivl_ms);
  socket_.set(zmq::sockopt::reconnect_ivl_max, options.reconnect_ivl_max_ms);
  if (options.heartbeat_ivl_ms > 0) {
    socket_.set(zmq::sockopt::heartbeat_ivl, options.heartbeat_ivl_ms);
    socket_.set(zmq::sockopt::heartbeat_timeout, options.heartbeat_timeout_ms);
    socket_.set(zmq::sockopt::heartbeat_ttl, options.heartbeat_timeout_ms);
  }
  // The kernel's keepalive as a second line, for a peer whose ZMTP heartbeats are off.
  socket_.set(zmq::sockopt::tcp_keepalive, 1);
  socket_.set(zmq::sockopt::tcp_keepalive_idle, 60);
  socket_.set(zmq::sockopt::tcp_keepalive_intvl, 10);
  if (router_) {
    // Unroutable messages are an error we see, not a silent drop.
    socket_.set(zmq::sockopt::router_mandatory, 1);
  }
  const CurveOptions& curve = options.curve;
  if (curve.enabled()) {
    // Binary keys: no doubt about how the option's length is read.
    const auto secret = decodeZ85Key(curve.secret_key);
    if (curve.server) {
      socket_.set(zmq::sockopt::curve_server, 1);
      socket_.set(zmq::sockopt::zap_domain, "tern");
    } else {
      const auto server = decodeZ85Key(curve.server_public_key);
      const auto own = decodeZ85Key(curvePublicKeyOf(curve.secret_key));
      socket_.set(zmq::sockopt::curve_serverkey, zmq::buffer(server));
      socket_.set(zmq::sockopt::curve_publickey, zmq::buffer(own));
    }
    socket_.set(zmq::sockopt::curve_secretkey, zmq::buffer(secret));
  }
}

std::string Channel::bind(const std::string& endpoint) {
  socket_.bind(endpoint);
  return socket_.get(zmq::sockopt::last_endpoint);
}

void Channel::connect(const std::string& endpoint) {
  socket_.connect(endpoint);
  connected_ = endpoint;
}

void Channel::reconnect() {
  if (connected_.empty()) return;
  try {
    socket_.disconnect(connected_);
  } catch (const zmq::error_t& e) {
    // ENOENT: libzmq already dropped the failed connection; connecting again is all we need.
    if (e.num() != ENOENT) throw;
  }
  socket_.connect(connected_);
}

namespace {

// libzmq's I/O thread calls this once the frame is sent or dropped: the payload's hold goes.
void releasePayloadOwner(void*, void* hold) {
  delete static_cast<std::shared_ptr<const void>*>(hold);
}

// The payload frame: a view of bytes `owner` keeps alive (libzmq drops its reference, on its I/O
// thread, when the frame is sent or discarded), or a copy without an owner.
zmq::message_t payloadFrame(std::span<const uint8_t> payload, std::shared_ptr<const void> owner) {
  if (!owner) return zmq::message_t(payload.data(), payload.size());
  auto* hold = new std::shared_ptr<const void>(std::move(owner));
  return zmq::message_t(const_cast<uint8_t*>(payload.data()), payload.size(), releasePayloadOwner,
                        hold);
}

}  // namespace

std::optional<size_t> Channel::send(const std::string& peer, const std::string& header,
                                    std::span<const uint8_t> payload,
                                    std::shared_ptr<const void> owner) {
  try {
    const bool has_payload = !payload.empty();
    if (router_) {
      zmq::message_t to(peer.data(), peer.size());
      if (!sendFrame(socket_, to, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        return std::nullopt;
      }
    }
    auto flags = has_payload ? zmq::send_flags::sndmore : zmq::send_flags::none;
    zmq::message_t head(header.data(), header.size());
    if (!sendFrame(socket_, head, flags | zmq::send_flags::dontwait)) return std::nullopt;
    if (has_payload) {
      auto body = payloadFrame(payload, std::move(owner));
      sendFrame(socket_, body, zmq::send_flags::none);
    }
    return header.size() + payload.size();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH || e.num() == EAGAIN) return std::nullopt;
    throw;
  }
}

bool Channel::waitReadable(std::chrono::milliseconds timeout,
                           std::span<zmq::socket_t* const> also) {
  std::vector<zmq::pollitem_t> items{{socket_.handle(), 0, ZMQ_POLLIN, 0}};
  for (auto* s : also) items.push_back({s->handle(), 0, ZMQ_POLLIN, 0});
  try {
    zmq::poll(items.data(), items.size(), timeout);
  } catch (const zmq::error_t& e) {
    // A signal (SIGTERM, SIGHUP) interrupted the wait: the loop checks its flags and goes on.
    if (e.num() == EINTR) return false;
    throw;
  }
  return (items[0].revents & ZMQ_POLLIN) != 0;
}

bool Channel::nextPart(zmq::message_t& part) {
  return receiveFrame(socket_, part, zmq::recv_flags::dontwait);
}

namespace {

// The ZAP user id libzmq attached to a frame, or empty (no ZAP, or the NULL mechanism).
std::string userIdOf(zmq::message_t& part) {
  const char* id = zmq_msg_gets(part.handle(), "User-Id");
  return id ? std::string(id) : std::string();
}

}  // namespace

std::optional<Frames> Channel::receive() {
  zmq::message_t part;
  try {
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) return std::nullopt;
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return std::nullopt;
    throw;
  }
  Frames f;
  if (router_) {
    f.peer.assign(static_cast<const char*>(part.data()), part.size());
    // A multipart message arrives whole: a missing continuation cannot happen, but be safe.
    if (!part.more() || !nextPart(part)) return f;
  }
  f.user_id = userIdOf(part);
  for (;;) {
    const bool more = part.more();
    ++f.frame_count;
    f.bytes += part.size();
    if (f.parts.size() < kMaxKeptFrames) {
      f.parts.push_back(std::move(part));
      part = zmq::message_t();
    }
    if (!more || !nextPart(part)) break;
  }
  return f;
}

}  // namespace tern::transport
