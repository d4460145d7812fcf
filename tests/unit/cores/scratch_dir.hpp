#pragma once
// A directory of one test process's own under the temporary directory, removed with the
// object: ctest runs each case as its own process, side by side, and a directory shared by name
// was emptied by one case under another.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace tern::testing {

struct ScratchDir {
  std::string dir;
  explicit ScratchDir(const std::string& name) {
    dir = (std::filesystem::temp_directory_path() /
           ("tern-" + name + "-" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace tern::testing
