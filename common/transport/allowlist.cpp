#include "common/transport/allowlist.hpp"

#include <algorithm>
#include <filesystem>

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

void Allowlist::add(const KeyLine& key, const std::string& file) {
  keys_.emplace(key.key, key.label.empty() ? file + ":" + std::to_string(key.line) : key.label);
}

std::optional<std::string> Allowlist::find(const std::string& public_z85) const {
  auto it = keys_.find(public_z85);
  if (it == keys_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tern::transport
