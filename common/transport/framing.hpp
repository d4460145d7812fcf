#pragma once
// Protocol messages <-> ZeroMQ frames: one protobuf envelope frame, then at most one raw payload
// frame. Anything else is malformed and reported as such (never thrown).
#include <optional>
#include <string>

#include "common/transport/channel.hpp"
#include "message.hpp"

namespace tern::transport {

struct Parsed {
  std::optional<Message> message;
  std::string error;  // set when !message
};

Parsed parseFrames(Frames& frames);
// Sends a message; returns the bytes handed to the socket (nullopt if it would block).
std::optional<size_t> sendMessage(Channel& channel, const std::string& peer, const Message& m);

}  // namespace tern::transport
