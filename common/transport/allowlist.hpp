#pragma once
// The CURVE public keys of the workers a coordinator admits. Loaded from one file (a key per
// line, optionally followed by a label such as the worker's name: concatenated .pub files) or
// from a directory whose *.pub files each hold one worker's key, labelled by the file name.
// A label word `names=a,b,pi-*` binds the key to the worker names it may join under (a trailing
// '*' matches any rest); a key without one may join under any name (docs/security.md).
// A daemon reloads it on SIGHUP; a reload that fails keeps the previous allowlist.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/transport/curve_keys.hpp"

namespace tern::transport {

class Allowlist {
 public:
  // Throws KeyFileError (naming file and line) when `path` is missing or holds a non-key line.
  static Allowlist load(const std::string& path);

  // The label of an admitted Z85 public key (a worker name or "file:line"), or nullopt.
  std::optional<std::string> find(const std::string& public_z85) const;
  // Whether a worker with this key may join under `name`: the key is listed, and it has no
  // names= or one of them matches.
  bool mayUse(const std::string& public_z85, const std::string& name) const;
  // The listed keys without names= (any name).
  size_t unboundKeys() const;
  size_t size() const { return keys_.size(); }
  const std::string& source() const { return source_; }

 private:
  struct Entry {
    std::string label;
    std::vector<std::string> names;  // empty: any name
  };
  void add(const KeyLine& key, const std::string& file);
  std::map<std::string, Entry> keys_;  // Z85 public key -> its entry
  std::string source_;
};

}  // namespace tern::transport
