#pragma once
// Strict YAML reading for tern's configuration: every value is read once into a plain struct,
// unknown keys, wrong types and out-of-range values fail with "file:line:column: message".
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace tern::config {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A number as a message shows it: an integer without a fraction, any other value in the fewest
// digits that read back as the same double (1e-12 stays 1e-12, 0.9999 stays 0.9999).
std::string formatNumber(double value);
template <typename T>
std::string formatNumber(T value) requires std::is_integral_v<T> {
  return std::to_string(value);
}

// Key paths ("allocation.method") set from the environment, with the variable that set each.
using Origins = std::map<std::string, std::string>;

// A mapping node being read. Call done() after reading all keys: it rejects unknown keys. A
// problem under a key the environment set is said at its variable instead of file:line:column.
class MapReader {
 public:
  MapReader(YAML::Node node, std::string file, std::string path = "",
            std::shared_ptr<const Origins> origins = nullptr);

  bool has(const std::string& key) const;
  bool hasMap(const std::string& key) const;  // present and a mapping (not a scalar or list)
  template <typename T>
  T get(const std::string& key, T fallback);
  template <typename T>
  T require(const std::string& key);
  template <typename T>
  std::vector<T> getVector(const std::string& key, std::vector<T> fallback);
  MapReader child(const std::string& key);  // an empty map when absent
  std::vector<MapReader> list(const std::string& key);
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  [[noreturn]] void failHere(const std::string& message) const;
  // At the key itself rather than its value (an empty value has no position of its own).
  [[noreturn]] void failAtKey(const std::string& key, const std::string& message) const;
  void done() const;
  const std::string& file() const { return file_; }
  // "file:line:column" of key's value, or "" when the key is absent.
  std::string at(const std::string& key) const;

  // Range checks that name the key's position on failure: lo <= value <= hi, and for
  // inRangeAbove lo < value <= hi. A floating-point value must be finite even where hi is not.
  template <typename T>
  T inRange(const std::string& key, T value, T lo, T hi) const {
    return checkRange(key, value, lo, false, hi);
  }
  template <typename T>
  T inRangeAbove(const std::string& key, T value, T lo, T hi) const {
    return checkRange(key, value, lo, true, hi);
  }
  std::string oneOf(const std::string& key, const std::string& value,
                    const std::vector<std::string>& allowed) const;

 private:
  template <typename T>
  T checkRange(const std::string& key, T value, T lo, bool lo_open, T hi) const {
    bool in = (lo_open ? value > lo : value >= lo) && value <= hi;  // NaN is in no range
    if constexpr (std::is_floating_point_v<T>) in = in && std::isfinite(value);  // nor infinity
    if (in) return value;
    std::string wanted = lo_open ? "> " + formatNumber(lo) + " and <= " + formatNumber(hi)
                                 : "in [" + formatNumber(lo) + ", " + formatNumber(hi) + "]";
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isinf(hi))
        wanted = "a finite number " + std::string(lo_open ? "> " : ">= ") + formatNumber(lo);
    }
    fail(key, "'" + key + "' must be " + wanted + ", got " + formatNumber(value));
  }
  std::string where(const YAML::Mark& mark) const;
  // Where the value of `key` (a key of this map; "" for the map itself) came from.
  std::string where(const YAML::Mark& mark, const std::string& key) const;
  // Throws "has no value" at a key present without a value (for sections and lists).
  void refuseValueless(const std::string& key) const;
  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::shared_ptr<const Origins> origins_;
  mutable std::set<std::string> seen_;
  mutable std::set<std::string> asked_empty_;  // keys has() found present without a value
};

// Loads a YAML file; a missing file or a syntax error becomes a ConfigError with position.
YAML::Node loadYamlFile(const std::string& file);

// The process's environment variables named TERN_*, by name.
std::map<std::string, std::string> ternEnvironment();

// Environment overrides of a configuration tree: TERN_<KEY>[__<KEY>...]=<value> sets the key
// path <key>.<key>... (names lower-cased; `__` between levels, `_` inside a name) to the value
// read as YAML. Only variables whose first key is in `top_keys` are settings (others, such as
// TERN_COORDINATOR_ARGS, are left alone). Returns what was set; a value that is not YAML is a
// ConfigError naming its variable.
Origins applyEnvironment(YAML::Node& root, const std::set<std::string>& top_keys,
                         const std::map<std::string, std::string>& environment);

template <typename T>
T MapReader::get(const std::string& key, T fallback) {
  seen_.insert(key);
  if (node_ && node_.IsMap() && node_[key] && node_[key].IsNull()) {
    failAtKey(key, "'" + path_ + key + "' has no value");
  }
  if (!has(key)) return fallback;
  return require<T>(key);
}

template <typename T>
T MapReader::require(const std::string& key) {
  seen_.insert(key);
  YAML::Node v = node_[key];
  if (!v) failHere("missing required key '" + path_ + key + "'");
  if (!v.IsScalar()) fail(key, "'" + key + "' must be a scalar value");
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    fail(key, "'" + key + "' has the wrong type (value '" + v.Scalar() + "')");
  }
}

template <typename T>
std::vector<T> MapReader::getVector(const std::string& key, std::vector<T> fallback) {
  seen_.insert(key);
  if (node_ && node_.IsMap() && node_[key] && node_[key].IsNull()) {
    failAtKey(key, "'" + path_ + key + "' has no value");
  }
  if (!has(key)) return fallback;
  YAML::Node v = node_[key];
  if (!v.IsSequence()) fail(key, "'" + path_ + key + "' must be a list");
  std::vector<T> out;
  for (size_t i = 0; i < v.size(); ++i) {
    try {
      out.push_back(v[i].as<T>());
    } catch (const YAML::Exception&) {
      fail(key, "'" + path_ + key + "' has an element of the wrong type");
    }
  }
  return out;
}

}  // namespace tern::config
