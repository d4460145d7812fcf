#pragma once
// A small JSON writer and reader for the daemons' /status document and the `status` client.
// Debian 12's Boost (1.74) has no Boost.JSON, and the documents are a few kilobytes built by
// tern itself, so a strict RFC 8259 reader with depth and size limits is all that is needed.
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tern::telemetry {

// Appends JSON text; the caller is responsible for well-formed nesting (keys only in objects).
class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(double d);  // NaN and infinities become null: JSON has no spelling for them
  JsonWriter& value(uint64_t u);
  JsonWriter& value(int64_t i);
  JsonWriter& value(uint32_t u) { return value(uint64_t(u)); }
  JsonWriter& value(int i) { return value(int64_t(i)); }
  JsonWriter& value(bool b);
  JsonWriter& null();
  const std::string& str() const { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

std::string jsonEscape(std::string_view s);

struct JsonValue;
using JsonObject = std::map<std::string, JsonValue, std::less<>>;
using JsonArray = std::vector<JsonValue>;

struct JsonValue {
  std::variant<std::nullptr_t, bool, double, std::string, JsonArray, JsonObject> v = nullptr;

  bool isNull() const { return std::holds_alternative<std::nullptr_t>(v); }
  bool isObject() const { return std::holds_alternative<JsonObject>(v); }
  bool isArray() const { return std::holds_alternative<JsonArray>(v); }
  bool isNumber() const { return std::holds_alternative<double>(v); }
  bool isString() const { return std::holds_alternative<std::string>(v); }
  // Typed accessors throw JsonError on a type mismatch.
  const JsonObject& object() const;
  const JsonArray& array() const;
  double number() const;
  const std::string& string() const;
  bool boolean() const;
  // Member lookup with a fallback for absent or null members (older peers omit new fields).
  const JsonValue* find(std::string_view key) const;
  double numberOr(std::string_view key, double fallback) const;
  std::string stringOr(std::string_view key, const std::string& fallback) const;
};

class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses one JSON document (surrounding whitespace allowed). Throws JsonError naming the byte
// offset of the first problem. max_depth bounds the nesting of objects and arrays (recursion
// on untrusted input).
JsonValue parseJson(std::string_view text, int max_depth = 64);

}  // namespace tern::telemetry
