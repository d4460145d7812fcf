#include "common/telemetry/json.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace tern::telemetry {

// ---- writer ---------------------------------------------------------------------------------

std::string jsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", unsigned(c));
        } else {
          out += char(c);
        }
    }
  }
  return out;
}

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::beginObject() {
  separate();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  out_ += '}';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  separate();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  out_ += ']';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  separate();
  out_ += '"';
  out_ += jsonEscape(k);
  out_ += "\":";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  separate();
  out_ += '"';
  out_ += jsonEscape(s);
  out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::value(double d) {
  if (!std::isfinite(d)) return null();
  separate();
  // Shortest representation that reads back to the same double.
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  out_.append(buf, end);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t u) {
  separate();
  out_ += std::to_string(u);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t i) {
  separate();
  out_ += std::to_string(i);
  return *this;
}

JsonWriter& JsonWriter::value(bool b) {
  separate();
  out_ += b ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  return *this;
}

// ---- value accessors ------------------------------------------------------------------------

namespace {
template <typename T>
const T& as(const JsonValue& j, const char* what) {
  if (auto* p = std::get_if<T>(&j.v)) return *p;
  throw JsonError(std::string("JSON value is not ") + what);
}
}  // namespace

const JsonObject& JsonValue::object() const { return as<JsonObject>(*this, "an object"); }
const JsonArray& JsonValue::array() const { return as<JsonArray>(*this, "an array"); }
double JsonValue::number() const { return as<double>(*this, "a number"); }
const std::string& JsonValue::string() const { return as<std::string>(*this, "a string"); }
bool JsonValue::boolean() const { return as<bool>(*this, "a boolean"); }

const JsonValue* JsonValue::find(std::string_view key) const {
  auto* o = std::get_if<JsonObject>(&v);
  if (!o) return nullptr;
  auto it = o->find(key);
  if (it == o->end() || it->second.isNull()) return nullptr;
  return &it->second;
}

double JsonValue::numberOr(std::string_view key, double fallback) const {
  auto* m = find(key);
  return m && m->isNumber() ? m->number() : fallback;
}

std::string JsonValue::stringOr(std::string_view key, const std::string& fallback) const {
  auto* m = find(key);
  return m && m->isString() ? m->string() : fallback;
}

// ---- reader ---------------------------------------------------------------------------------

namespace {

class Parser {
 public:
  Parser(std::string_view text, int max_depth) : s_(text), max_depth_(max_depth) {}

  JsonValue document() {
    JsonValue v = value(0);
    skipSpace();
    if (pos_ != s_.size()) fail("trailing characters after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw JsonError(fmt::format("JSON: {} at byte {}", what, pos_));
  }
  void skipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  char peek() {
    skipSpace();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    return s_[pos_];
  }
  void expectWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) fail("invalid literal");
    pos_ += w.size();
  }

  JsonValue value(int depth) {
    char c = peek();
    if ((c == '{' || c == '[') && depth >= max_depth_) fail("nesting deeper than the limit");
    JsonValue out;
    if (c == '{') {
      out.v = object(depth);
    } else if (c == '[') {
      out.v = array(depth);
    } else if (c == '"') {
      out.v = string();
    } else if (c == 't') {
      expectWord("true");
      out.v = true;
    } else if (c == 'f') {
      expectWord("false");
      out.v = false;
    } else if (c == 'n') {
      expectWord("null");
      out.v = nullptr;
    } else {
      out.v = number();
    }
    return out;
  }

  JsonObject object(int depth) {
    JsonObject o;
    ++pos_;  // '{'
    if (peek() == '}') {
      ++pos_;
      return o;
    }
    while (true) {
      if (peek() != '"') fail("expected a member name");
      std::string k = string();
      if (peek() != ':') fail("expected ':'");
      ++pos_;
      JsonValue v = value(depth + 1);
      if (!o.emplace(std::move(k), std::move(v)).second) fail("duplicate member name");
      char c = peek();
      ++pos_;
      if (c == '}') return o;
      if (c != ',') fail("expected ',' or '}'");
    }
  }

  JsonArray array(int depth) {
    JsonArray a;
    ++pos_;  // '['
    if (peek() == ']') {
      ++pos_;
      return a;
    }
    while (true) {
      a.push_back(value(depth + 1));
      char c = peek();
      ++pos_;
      if (c == ']') return a;
      if (c != ',') fail("expected ',' or ']'");
    }
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      u <<= 4;
      if (c >= '0' && c <= '9') {
        u |= unsigned(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        u |= unsigned(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        u |= unsigned(c - 'A' + 10);
      } else {
        fail("bad hex digit in \\u escape");
      }
    }
    return u;
  }

  static void appendUtf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("control character in string");
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (s_.substr(pos_, 2) != "\\u") fail("lone high surrogate");
            pos_ += 2;
            unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("lone low surrogate");
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          fail("unknown escape");
      }
    }
  }

  double number() {
    // Validate the JSON number grammar first (from_chars alone accepts "inf", leading '+', ...).
    size_t start = pos_;
    auto digit = [&] { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; };
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (!digit()) fail("invalid value");
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (digit()) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digit()) fail("digit expected after '.'");
      while (digit()) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digit()) fail("digit expected in exponent");
      while (digit()) ++pos_;
    }
    double d = 0;
    auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, d);
    if (ec == std::errc::result_out_of_range) fail("number out of range");
    if (ec != std::errc() || end != s_.data() + pos_) fail("invalid number");
    return d;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int max_depth_;
};

}  // namespace

JsonValue parseJson(std::string_view text, int max_depth) {
  return Parser(text, max_depth).document();
}

}  // namespace tern::telemetry
