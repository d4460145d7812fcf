#include "common/config/yaml_reader.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

namespace tern::config {

namespace {

// Keys longer than this are not matched against the known ones (none is near that long).
constexpr size_t kMaxGuessedKeyBytes = 64;

// Levenshtein distance between a and b (insertions, deletions and substitutions of one byte).
size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean 'K'?)" for the known key nearest `key` when it is a likely slip (at most a
// quarter of its letters off, at least one), else "".
std::string didYouMean(const std::string& key, const std::set<std::string>& known,
                       const std::string& path) {
  if (key.size() > kMaxGuessedKeyBytes) return "";  // no key is that long: no quadratic guess
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(1, key.size() / 4) + 1;
  for (const auto& k : known) {
    const size_t d = editDistance(key, k);
    if (d < best_distance) best = &k, best_distance = d;
  }
  return best ? " (did you mean '" + path + *best + "'?)" : "";
}

}  // namespace

std::string formatNumber(double value) {
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char text[64];
  const auto written = std::to_chars(text, text + sizeof text, value);
  return std::string(text, written.ptr);
}

MapReader::MapReader(YAML::Node node, std::string file, std::string path,
                     std::shared_ptr<const Origins> origins)
    : node_(std::move(node)),
      file_(std::move(file)),
      path_(std::move(path)),
      origins_(std::move(origins)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    failHere("expected a mapping" + (path_.empty() ? std::string() : " for '" + path_ + "'"));
  }
  if (!node_ || !node_.IsMap()) return;
  // YAML keeps both of two equal keys, and a lookup would silently read the first.
  std::map<std::string, YAML::Mark> first;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) {
      throw ConfigError(where(kv.first.Mark()) + ": a key must be a plain name");
    }
    const std::string key = kv.first.Scalar();
    auto [it, inserted] = first.emplace(key, kv.first.Mark());
    if (!inserted) {
      throw ConfigError(where(kv.first.Mark()) + ": duplicate key '" + path_ + key +
                        "' (first at line " + std::to_string(it->second.line + 1) + ")");
    }
  }
}

std::string MapReader::at(const std::string& key) const {
  if (!node_ || !node_.IsMap() || !node_[key]) return "";
  return where(node_[key].Mark());
}

std::string MapReader::where(const YAML::Mark& mark, const std::string& key) const {
  if (origins_) {
    std::string full = path_ + key;
    if (key.empty() && !full.empty() && full.back() == '.') full.pop_back();
    for (const auto& [set, variable] : *origins_) {
      if (full.rfind(set, 0) == 0 &&
          (full.size() == set.size() || full[set.size()] == '.' || full[set.size()] == '[')) {
        return "environment " + variable;
      }
    }
  }
  return where(mark);
}

std::string MapReader::where(const YAML::Mark& mark) const {
  if (mark.is_null()) return file_ + ":1:1";
  return file_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

bool MapReader::has(const std::string& key) const {
  if (!node_ || !node_.IsMap() || !node_[key]) return false;
  if (node_[key].IsNull()) {
    // Asked for, so known: done() names it as empty rather than unknown.
    asked_empty_.insert(key);
    return false;
  }
  return true;
}

bool MapReader::hasMap(const std::string& key) const { return has(key) && node_[key].IsMap(); }

void MapReader::fail(const std::string& key, const std::string& message) const {
  YAML::Node v = node_ && node_.IsMap() ? node_[key] : YAML::Node();
  throw ConfigError(where(v ? v.Mark() : node_.Mark(), key) + ": " + message);
}

void MapReader::failAtKey(const std::string& key, const std::string& message) const {
  if (node_ && node_.IsMap()) {
    for (const auto& kv : node_) {
      if (kv.first.IsScalar() && kv.first.Scalar() == key) {
        throw ConfigError(where(kv.first.Mark(), key) + ": " + message);
      }
    }
  }
  failHere(message);
}

void MapReader::failHere(const std::string& message) const {
  throw ConfigError(where(node_ ? node_.Mark() : YAML::Mark::null_mark(), "") + ": " + message);
}

void MapReader::refuseValueless(const std::string& key) const {
  // A section written without a value ("optimizer:" and nothing under it) is a mistake, not an
  // empty section ("optimizer: {}").
  if (node_ && node_.IsMap() && node_[key] && node_[key].IsNull())
    failAtKey(key, "'" + path_ + key + "' has no value");
}

MapReader MapReader::child(const std::string& key) {
  seen_.insert(key);
  refuseValueless(key);
  if (!has(key))
    return MapReader(YAML::Node(YAML::NodeType::Map), file_, path_ + key + ".", origins_);
  YAML::Node v = node_[key];
  if (!v.IsMap()) fail(key, "'" + path_ + key + "' must be a mapping");
  return MapReader(v, file_, path_ + key + ".", origins_);
}

std::vector<MapReader> MapReader::list(const std::string& key) {
  seen_.insert(key);
  refuseValueless(key);
  std::vector<MapReader> out;
  if (!has(key)) return out;
  YAML::Node v = node_[key];
  if (!v.IsSequence()) fail(key, "'" + path_ + key + "' must be a list");
  for (size_t i = 0; i < v.size(); ++i) {
    out.emplace_back(v[i], file_, path_ + key + "[" + std::to_string(i) + "].", origins_);
  }
  return out;
}

void MapReader::done() const {
  if (!node_ || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    const std::string key = kv.first.as<std::string>();
    if (asked_empty_.count(key) && !seen_.count(key)) {
      throw ConfigError(where(kv.first.Mark(), key) + ": '" + path_ + key + "' has no value");
    }
    if (!seen_.count(key)) {
      throw ConfigError(where(kv.first.Mark(), key) + ": unknown key '" + path_ + key + "'" +
                        didYouMean(key, seen_, path_));
    }
  }
}

std::string MapReader::oneOf(const std::string& key, const std::string& value,
                             const std::vector<std::string>& allowed) const {
  for (const auto& a : allowed) {
    if (a == value) return value;
  }
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  fail(key, "'" + path_ + key + "' must be one of " + list + ", got '" + value + "'");
}

namespace {

// A configuration is one YAML document: what follows a second `---` is refused, not dropped.
std::string secondDocument(const std::string& file, const YAML::Node& second) {
  const YAML::Mark m = second.Mark();
  const std::string at =
      m.is_null() ? "1:1" : std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  return file + ":" + at +
         ": a second YAML document ('---'): a configuration file holds exactly one";
}

}  // namespace

YAML::Node loadYamlFile(const std::string& file) {
  if (!std::filesystem::exists(file))
    throw ConfigError(file + ":1:1: configuration file not found");
  if (std::error_code ec; std::filesystem::is_directory(file, ec))
    throw ConfigError(file + ":1:1: is a directory, not a configuration file");
  if (std::ifstream probe(file); !probe) {
    throw ConfigError(file + ":1:1: cannot read the configuration file: " + std::strerror(errno));
  }
  std::vector<YAML::Node> docs;
  try {
    // Every document is parsed: a second one would otherwise be ignored unread.
    docs = YAML::LoadAllFromFile(file);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(file + ":" + std::to_string(e.mark.line + 1) + ":" +
                      std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    throw ConfigError(file + ":1:1: " + e.what());
  } catch (const std::exception& e) {
    throw ConfigError(file + ":1:1: cannot read the configuration file: " + e.what());
  }
  if (docs.size() > 1) throw ConfigError(secondDocument(file, docs[1]));
  if (docs.empty() || docs[0].IsNull()) return YAML::Node(YAML::NodeType::Map);
  return docs[0];
}

namespace {

// Sets root's key path to `value`, making the mappings on the way (a scalar there is replaced).
void setPath(YAML::Node node, const std::vector<std::string>& path, size_t i,
             const YAML::Node& value) {
  if (i + 1 == path.size()) {
    node[path[i]] = value;
    return;
  }
  if (!node[path[i]].IsMap()) node[path[i]] = YAML::Node(YAML::NodeType::Map);
  setPath(node[path[i]], path, i + 1, value);
}

// "ALLOCATION__METHOD" -> {"allocation", "method"}; empty when a level's name is empty.
std::vector<std::string> keyPath(const std::string& name) {
  std::vector<std::string> path;
  size_t from = 0;
  while (true) {
    const size_t sep = name.find("__", from);
    std::string key = name.substr(from, sep == std::string::npos ? sep : sep - from);
    for (char& ch : key) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (key.empty()) return {};
    path.push_back(std::move(key));
    if (sep == std::string::npos) return path;
    from = sep + 2;
  }
}

}  // namespace

std::map<std::string, std::string> ternEnvironment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && entry.rfind("TERN_", 0) == 0)
      out.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return out;
}

Origins applyEnvironment(YAML::Node& root, const std::set<std::string>& top_keys,
                         const std::map<std::string, std::string>& environment) {
  Origins set;
  if (!root.IsMap()) return set;
  for (const auto& [variable, text] : environment) {
    if (variable.rfind("TERN_", 0) != 0) continue;
    const std::vector<std::string> path = keyPath(variable.substr(5));
    if (path.empty() || !top_keys.count(path.front())) continue;
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ConfigError("environment " + variable + ": not a YAML value: " + e.msg);
    }
    setPath(root, path, 0, value);
    std::string joined;
    for (const auto& key : path) joined += (joined.empty() ? "" : ".") + key;
    set[joined] = variable;
  }
  return set;
}

}  // namespace tern::config
