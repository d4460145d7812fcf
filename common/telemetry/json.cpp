#include "common/telemetry/json.hpp"

#include <fmt/format.h>

#include <set>
#include <vector>

namespace tern::telemetry {

std::string dumpJson(const OrderedJson& doc) {
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// Called by the parser on every event: refuses nesting deeper than the limit and a member name
// seen twice in one object by throwing, so nothing of a refused document is kept.
class StrictCheck {
 public:
  explicit StrictCheck(int max_depth) : max_depth_(max_depth) {}

  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      if (depth >= max_depth_) throw JsonError("JSON: nesting deeper than the limit");
      if (event == Event::object_start) keys_.emplace_back();
    } else if (event == Event::object_end) {
      keys_.pop_back();
    } else if (event == Event::key) {
      if (!keys_.back().insert(parsed.get<std::string>()).second) {
        throw JsonError("JSON: duplicate member name");
      }
    }
    return true;
  }

 private:
  int max_depth_;
  std::vector<std::set<std::string>> keys_;  // member names of each open object
};

}  // namespace

Json parseJson(std::string_view text, int max_depth) {
  try {
    return Json::parse(text.begin(), text.end(), StrictCheck(max_depth));
  } catch (const Json::exception& e) {  // parse_error, out_of_range (1e999)
    throw JsonError(fmt::format("JSON: {}", e.what()));
  }
}

const Json* jsonFind(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

double jsonNumberOr(const Json& object, std::string_view key, double fallback) {
  const Json* m = jsonFind(object, key);
  return m && m->is_number() ? m->get<double>() : fallback;
}

std::string jsonStringOr(const Json& object, std::string_view key, const std::string& fallback) {
  const Json* m = jsonFind(object, key);
  return m && m->is_string() ? m->get<std::string>() : fallback;
}

}  // namespace tern::telemetry
