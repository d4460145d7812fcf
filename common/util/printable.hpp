#pragma once
// Strings from peers (worker names, leave reasons, a status document) shown in logs and on a
// terminal: control bytes (a newline that would forge a log line, an escape sequence that would
// drive the terminal) are written as \xNN, and the text is cut at `max_bytes` ("..." marks it).
#include <cstddef>
#include <string>
#include <string_view>

namespace tern {

inline std::string printable(std::string_view s, size_t max_bytes = 256) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

// Whether s holds a control byte (printable() would change it).
inline bool hasControlBytes(std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace tern
