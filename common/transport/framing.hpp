#pragma once
// Protocol messages <-> ZeroMQ frames: one protobuf envelope frame, then at most one raw payload
// frame. Anything else is malformed and reported as such (never thrown).
#include <optional>
#include <string>

#include "common/transport/channel.hpp"
#include "message.hpp"

namespace tern::transport {

// The largest envelope frame parsed: envelopes are a few hundred bytes; anything near this is
// not a tern message (and protobuf takes sizes as int).
inline constexpr size_t kMaxEnvelopeBytes = size_t{1} << 20;

struct Parsed {
  std::optional<Message> message;
  // Set when !message: a fixed reason (bad_frame_count | envelope_too_large |
  // envelope_unparseable), the key it is counted under, and the detail for a log line.
  std::string reason;
  std::string error;
};

Parsed parseFrames(Frames& frames);
// Sends a message; returns the bytes handed to the socket (nullopt if it would block).
std::optional<size_t> sendMessage(Channel& channel, const std::string& peer, const Message& m);

}  // namespace tern::transport
