#include "common/transport/framing.hpp"

#include <algorithm>

namespace tern::transport {

Parsed parseFrames(Frames& frames) {
  Parsed out;
  // frame_count: every frame received; parts: those kept (a Frames made by hand sets only parts).
  const size_t count = std::max(frames.frame_count, frames.parts.size());
  if (count == 0 || count > kMaxKeptFrames) {
    out.reason = "bad_frame_count";
    out.error = "expected 1 or 2 frames, got " + std::to_string(count);
    return out;
  }
  Message m;
  const auto& head = frames.parts[0];
  if (head.size() > kMaxEnvelopeBytes) {
    out.reason = "envelope_too_large";
    out.error = "envelope frame of " + std::to_string(head.size()) + " bytes (at most " +
                std::to_string(kMaxEnvelopeBytes) + ")";
    return out;
  }
  if (!m.envelope.ParseFromArray(head.data(), int(head.size()))) {
    out.reason = "envelope_unparseable";
    out.error = "envelope does not parse";
    return out;
  }
  if (frames.parts.size() == 2) {
    // The payload is read where it arrived: the frame itself becomes its owner.
    auto frame = std::make_shared<zmq::message_t>(std::move(frames.parts[1]));
    const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(frame->data()), frame->size());
    m.payload = Payload(std::move(frame), bytes);
  }
  out.message = std::move(m);
  return out;
}

std::optional<size_t> sendMessage(Channel& channel, const std::string& peer, const Message& m) {
  std::string header = m.envelope.SerializeAsString();
  return channel.send(peer, header, m.payload, m.payload.owner());
}

}  // namespace tern::transport
