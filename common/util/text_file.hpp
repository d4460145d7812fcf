#pragma once
// A small text file (an endpoint, a URL) that readers poll for: written to PATH.tmp, then
// renamed over PATH, so a reader never sees half of it. Throws std::runtime_error naming the
// path when the directory is missing or not writable.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

namespace tern {

inline void writeTextFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (out) out << text;
    if (out) out.flush();
    if (!out) {
      throw std::runtime_error(path + ": cannot write: " + std::strerror(errno) +
                               " (does its directory exist, and may this user write there?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error(path + ": cannot rename " + tmp + " over it: " + std::strerror(errno));
  }
}

}  // namespace tern
