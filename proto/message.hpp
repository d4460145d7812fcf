#pragma once
// A protocol message as the cores see it: the envelope plus an optional raw payload frame.
// Cores return these as actions; daemons (and the simulator) carry them.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "payload.hpp"
#include "tern.pb.h"

namespace tern {

struct Message {
  wire::Envelope envelope;
  Payload payload;
};

// A message addressed to a peer (the coordinator's ROUTER identity of a worker).
struct Outgoing {
  std::string peer;
  Message message;
};

inline wire::Envelope makeEnvelope() {
  wire::Envelope e;
  e.set_version(wire::PROTOCOL_VERSION);
  return e;
}

// fp32 little-endian (the platforms tern targets are all little-endian).
std::vector<uint8_t> floatsToBytes(std::span<const float> values);
// False if the byte count is not exactly 4 * out.size().
bool bytesToFloats(std::span<const uint8_t> bytes, std::span<float> out);

}  // namespace tern
