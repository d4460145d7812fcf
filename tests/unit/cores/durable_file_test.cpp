// The daemons' durable files (checkpoint, endpoint, URL): replaced whole, owner-only, and every
// failure named with its path.
#include "common/util/durable_file.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "../ml/test_support.hpp"
#include "file_size_limit.hpp"

namespace {

// A directory of this case's own, removed after it.
struct Scratch : tern::ml::testing::ScratchDir {
  Scratch() : ScratchDir("durable-file-test") {}
};

std::string errorOf(void (*f)(const std::string&, const std::string&), const std::string& path) {
  try {
    f(path, "x");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a durable file is replaced whole, owner-only, and leaves no temporary behind") {
  const Scratch scratch;
  const std::string path = scratch.file("state");
  CHECK_FALSE(tern::readFileIfExists(path).has_value());
  tern::writeFileAtomically(path, "first");
  tern::writeFileAtomically(path, std::string("second\0with a zero", 18));
  CHECK(tern::readFileIfExists(path) == std::string("second\0with a zero", 18));
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  tern::checkWritable(path);  // leaves the file as it was
  CHECK(tern::readFileIfExists(path) == std::string("second\0with a zero", 18));
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("a durable file in a missing directory is refused, naming the file") {
  const Scratch scratch;
  const std::string path = scratch.file("no-such-dir/state");
  const std::string error = errorOf(
      [](const std::string& p, const std::string& b) { tern::writeFileAtomically(p, b); }, path);
  CHECK(error.rfind(path + ".tmp: cannot create: ", 0) == 0);
  CHECK_THROWS_AS(tern::checkWritable(path), std::runtime_error);
}

TEST_CASE("a write that fails part way removes its temporary file and keeps the old one") {
  // A file-size limit of 100 bytes (SIGXFSZ ignored) makes the write fail with EFBIG part way,
  // as a full disk would: the partial temporary must not stay to hold the space.
  Scratch s;
  const std::string path = s.file("ckpt");
  tern::writeFileAtomically(path, "old");
  std::string error;
  try {
    const tern::testing::FileSizeLimit limit(100);
    tern::writeFileAtomically(path, std::string(1000, 'x'));
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  CHECK(error.find("write failed") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  CHECK(tern::readFileIfExists(path) == std::optional<std::string>("old"));
}
