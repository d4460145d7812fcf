#pragma once
// While a FileSizeLimit lives, no file of this process may grow past the given size (SIGXFSZ
// ignored): a write past it fails with EFBIG part way, as on a full disk.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <csignal>

namespace tern::testing {

struct FileSizeLimit {
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
    handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = before;
    small.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &before);
    std::signal(SIGXFSZ, handler);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  struct rlimit before {};
  void (*handler)(int) = nullptr;
};

}  // namespace tern::testing
