#include "common/util/bind_address.hpp"

#include <stdexcept>

namespace tern {

std::string bindAddressProblem(const std::string& text, BindAddress& out) {
  out = BindAddress{};
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return "expected [IPV6]:PORT";
    }
    out.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) return "expected HOST:PORT";
    out.host = text.substr(0, colon);
    if (out.host.find(':') != std::string::npos) return "put IPv6 hosts in brackets";
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) out.host = "0.0.0.0";
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port_text) > 65535) {
    return "port must be 0..65535";
  }
  out.port = uint16_t(std::stoul(port_text));
  return "";
}

BindAddress parseBindAddress(const std::string& text) {
  BindAddress out;
  if (std::string why = bindAddressProblem(text, out); !why.empty()) {
    throw std::invalid_argument("HTTP address '" + text + "': " + why);
  }
  return out;
}

}  // namespace tern
