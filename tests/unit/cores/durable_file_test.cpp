// The daemons' durable files (checkpoint, endpoint, URL): replaced whole, owner-only, and every
// failure named with its path.
#include "common/util/durable_file.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace {

// A directory of this case's own, removed after it: ctest runs each case as its own process,
// side by side, and a directory shared by name was emptied by one case under another.
struct Scratch {
  std::string dir;
  Scratch() {
    dir = (std::filesystem::temp_directory_path() /
           ("tern-durable-file-test-" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
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
  const std::string& dir = scratch.dir;
  const std::string path = dir + "/state";
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
  const std::string path = scratch.dir + "/no-such-dir/state";
  const std::string error = errorOf(tern::writeFileAtomically, path);
  CHECK(error.rfind(path + ".tmp: cannot create: ", 0) == 0);
  CHECK_THROWS_AS(tern::checkWritable(path), std::runtime_error);
}
