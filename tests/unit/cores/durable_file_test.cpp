// The daemons' durable files (checkpoint, endpoint, URL): replaced whole, owner-only, and every
// failure named with its path.
#include "common/util/durable_file.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace {

std::string scratchDir() {
  const auto dir = std::filesystem::temp_directory_path() / "tern-durable-file-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

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
  const std::string dir = scratchDir();
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
  const std::string path = scratchDir() + "/no-such-dir/state";
  const std::string error = errorOf(tern::writeFileAtomically, path);
  CHECK(error.rfind(path + ".tmp: cannot create: ", 0) == 0);
  CHECK_THROWS_AS(tern::checkWritable(path), std::runtime_error);
}
