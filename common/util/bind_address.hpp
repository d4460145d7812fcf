#pragma once
// A TCP address to listen on, as written in configuration and on command lines: checked where it
// is written (config) and parsed again where it is bound (the telemetry HTTP server).
#include <cstdint>
#include <string>

namespace tern {

// "HOST:PORT", "[V6]:PORT" or ":PORT" (all IPv4 interfaces). Port 0 = any free port.
struct BindAddress {
  std::string host;
  uint16_t port = 0;
};
// "" when `text` is such an address, then parsed into `out`; else what is wrong with it ("port
// must be 0..65535", ...).
std::string bindAddressProblem(const std::string& text, BindAddress& out);
// Throws std::invalid_argument with a message naming the address and the problem.
BindAddress parseBindAddress(const std::string& text);

}  // namespace tern
