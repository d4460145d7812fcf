#pragma once
// Strings from peers (worker names, leave reasons, error texts, a status document) shown in logs,
// metrics labels and on a terminal: control characters (C0, DEL and C1: a newline that would
// forge a log line, an escape sequence that would drive the terminal), invisible and
// direction-changing characters, and bytes that are not UTF-8 are written as \xNN, and the text is
// cut at `max_bytes` on a character boundary ("..." marks the cut).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

namespace detail {

// Code points that show nothing or reorder what follows: a name that holds one can pass for
// another (a zero-width space, a right-to-left override) and a line separator forges a log line.
// The joiners U+200C and U+200D are left: Persian, Indic scripts and emoji sequences need them.
inline bool invisible(uint32_t cp) {
  return cp == 0xad || cp == 0x34f || cp == 0x61c || cp == 0x115f || cp == 0x1160 || cp == 0x17b4 ||
         cp == 0x17b5 || cp == 0x180e || cp == 0x200b || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) || cp == 0x3164 ||
         cp == 0xfeff || cp == 0xffa0 || (cp >= 0xfff9 && cp <= 0xfffb) ||
         (cp >= 0xe0000 && cp <= 0xe007f);
}

// The length of the valid UTF-8 character at s[i] that is not a control or invisible character
// (above), or 0.
inline size_t printableCharAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c >= 0x20 && c < 0x7f) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;  // C0, DEL, a continuation byte or one that never starts a character
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  const bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
  const bool c1 = cp >= 0x80 && cp <= 0x9f;
  if (overlong || surrogate || c1 || cp > 0x10ffff || invisible(cp)) return 0;
  return n;
}

}  // namespace detail

inline std::string printable(std::string_view s, size_t max_bytes = 256) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = detail::printableCharAt(s, i);
    const size_t width = n > 0 ? n : 4;
    if (out.size() + width > max_bytes) break;
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      const auto c = static_cast<unsigned char>(s[i++]);
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (i < s.size()) out += "...";
  return out;
}

// Whether printable() would change s: it holds a control character or is not UTF-8.
inline bool hasControlBytes(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = detail::printableCharAt(s, i);
    if (n == 0) return true;
    i += n;
  }
  return false;
}

}  // namespace tern
