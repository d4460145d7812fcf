#include "common/transport/allowlist.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string_view>

namespace tern::transport {

Allowlist Allowlist::load(const std::string& path) {
  namespace fs = std::filesystem;
  Allowlist list;
  list.source_ = path;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    throw KeyFileError(path + ": allowlist not found");
  }
  if (status.type() != fs::file_type::directory) {
    for (const auto& k : readKeyLines(path, "allowlist")) list.add(k, path);
    return list;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.path().extension() == ".pub") files.push_back(entry.path());
  }
  if (ec) throw KeyFileError(path + ": cannot list the allowlist directory: " + ec.message());
  std::sort(files.begin(), files.end());  // deterministic labels when a key appears twice
  for (const auto& f : files) {
    auto keys = readKeyLines(f.string(), "public key file");
    if (keys.empty()) throw KeyFileError(f.string() + ": no CURVE key in this public key file");
    for (auto& k : keys) {
      if (k.label.empty()) k.label = f.stem().string();
      list.add(k, f.string());
    }
  }
  return list;
}

namespace {

constexpr std::string_view kNamesWord = "names=";

// A label's names= word split at commas (empty names dropped); the rest of the label is kept.
std::vector<std::string> takeNames(std::string& label) {
  std::vector<std::string> names;
  std::istringstream words(label);
  std::string word, rest;
  while (words >> word) {
    if (!word.starts_with(kNamesWord)) {
      rest += (rest.empty() ? "" : " ") + word;
      continue;
    }
    std::istringstream list(word.substr(kNamesWord.size()));
    for (std::string name; std::getline(list, name, ',');) {
      if (!name.empty()) names.push_back(name);
    }
  }
  label = rest;
  return names;
}

bool nameMatches(const std::string& pattern, const std::string& name) {
  if (pattern.ends_with('*')) return name.starts_with(pattern.substr(0, pattern.size() - 1));
  return pattern == name;
}

}  // namespace

void Allowlist::add(const KeyLine& key, const std::string& file) {
  std::string label = key.label;
  std::vector<std::string> names = takeNames(label);
  if (label.empty()) label = file + ":" + std::to_string(key.line);
  keys_.emplace(key.key, Entry{std::move(label), std::move(names)});
}

std::optional<std::string> Allowlist::find(const std::string& public_z85) const {
  auto it = keys_.find(public_z85);
  if (it == keys_.end()) return std::nullopt;
  return it->second.label;
}

bool Allowlist::mayUse(const std::string& public_z85, const std::string& name) const {
  auto it = keys_.find(public_z85);
  if (it == keys_.end()) return false;
  const auto& names = it->second.names;
  return names.empty() || std::any_of(names.begin(), names.end(),
                                      [&](const std::string& p) { return nameMatches(p, name); });
}

size_t Allowlist::unboundKeys() const {
  return size_t(std::count_if(keys_.begin(), keys_.end(),
                              [](const auto& e) { return e.second.names.empty(); }));
}

}  // namespace tern::transport
