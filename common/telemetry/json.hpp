#pragma once
// JSON for the daemons' /status document and the `status` client, on nlohmann-json: documents
// are written with members in the order given (OrderedJson) and read strictly (RFC 8259, no
// duplicate member names, bounded nesting) into Json, whose object members are sorted by name.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tern::telemetry {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Compact text; NaN and infinities become null (JSON has no spelling for them), and bytes that
// are not UTF-8 become U+FFFD instead of failing the whole document.
std::string dumpJson(const OrderedJson& doc);

// Parses one JSON document (surrounding whitespace allowed). Throws JsonError naming where the
// first problem is. max_depth bounds the nesting of objects and arrays (untrusted
// input).
Json parseJson(std::string_view text, int max_depth = 64);

// Member lookup in an object, absent and null members alike giving nullptr or the fallback
// (older peers omit newer fields); a non-object has no members.
const Json* jsonFind(const Json& object, std::string_view key);
double jsonNumberOr(const Json& object, std::string_view key, double fallback);
std::string jsonStringOr(const Json& object, std::string_view key, const std::string& fallback);

}  // namespace tern::telemetry
