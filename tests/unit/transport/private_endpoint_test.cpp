// The ROUTER's private endpoint: its directory is the user's alone and locked while it lives; a
// coordinator's start sweeps away what killed coordinators left, and nothing else.
#include "common/transport/private_endpoint.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/transport/test_files.hpp"

using namespace tern;
namespace fs = std::filesystem;

namespace {

// A unix socket bound at path: listening (a coordinator that runs) or closed at once (one
// killed: the file stays, connections are refused).
int boundSocket(const std::string& path, bool listening) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof(a.sun_path));
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  REQUIRE(::bind(s, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0);
  if (listening) {
    REQUIRE(::listen(s, 4) == 0);
    return s;
  }
  ::close(s);
  return -1;
}

// A directory under base as a coordinator makes it (mode 0700), with a socket `router` (live,
// dead or none), last changed `age` seconds ago.
struct Leftover {
  std::string dir;
  int socket_fd = -1;
  Leftover(const fs::path& base, const std::string& name, std::optional<bool> listening,
           double age = 3600) {
    dir = (base / name).string();
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    if (listening) socket_fd = boundSocket(dir + "/router", *listening);
    age_by(age);
  }
  ~Leftover() {
    if (socket_fd >= 0) ::close(socket_fd);
  }
  void age_by(double seconds) const {
    timespec t[2];
    ::clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= time_t(seconds);
    t[1] = t[0];
    REQUIRE(::utimensat(AT_FDCWD, dir.c_str(), t, 0) == 0);
  }
  bool exists() const { return fs::exists(fs::symlink_status(dir)); }
};

// A short base: the socket's path must fit in sockaddr_un.
struct ShortBase {
  fs::path path;
  ShortBase() {
    char templ[] = "/tmp/tpe-XXXXXX";
    REQUIRE(::mkdtemp(templ) != nullptr);
    path = templ;
  }
  ~ShortBase() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("the sweep removes the directories of killed coordinators and nothing else") {
  ShortBase base;
  const Leftover dead(base.path, "tern-router-aB3xY9", false);
  const Leftover never_bound(base.path, "tern-router-Q0w2e4", std::nullopt);
  const Leftover old_dead(base.path, "tern-Old000", false);          // an earlier version's name
  const Leftover old_empty(base.path, "tern-Old111", std::nullopt);  // anyone's mktemp -d
  const Leftover live(base.path, "tern-router-Live00", true);
  const Leftover young(base.path, "tern-router-Young1", false, 0);
  const Leftover other_name(base.path, "tern-router-abc", false);
  const Leftover other_file(base.path, "tern-router-More11", false);
  std::ofstream(other_file.dir + "/notes") << "keep";
  other_file.age_by(3600);
  const Leftover open_mode(base.path, "tern-router-Mode22", false);
  REQUIRE(::chmod(open_mode.dir.c_str(), 0755) == 0);
  const Leftover locked(base.path, "tern-router-Lock33", false);
  const int lock = ::open(locked.dir.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(lock >= 0);
  REQUIRE(::flock(lock, LOCK_EX | LOCK_NB) == 0);  // as a running coordinator holds its own
  const Leftover target(base.path, "target", false);
  fs::create_directory_symlink(target.dir, base.path / "tern-router-Link44");

  CHECK(transport::sweepDeadEndpoints(base.path.string()) == 3);
  CHECK_FALSE(dead.exists());
  CHECK_FALSE(never_bound.exists());
  CHECK_FALSE(old_dead.exists());
  CHECK(old_empty.exists());
  CHECK(live.exists());
  CHECK(fs::exists(fs::symlink_status(live.dir + "/router")));
  CHECK(young.exists());
  CHECK(other_name.exists());
  CHECK(fs::exists(other_file.dir + "/notes"));
  CHECK(fs::exists(fs::symlink_status(other_file.dir + "/router")));
  CHECK(open_mode.exists());
  CHECK(locked.exists());
  CHECK(fs::exists(fs::symlink_status(target.dir + "/router")));  // a link is not followed
  CHECK(fs::is_symlink(base.path / "tern-router-Link44"));
  ::close(lock);
  CHECK(transport::sweepDeadEndpoints(base.path.string()) == 1);  // the lock let go of
  CHECK_FALSE(locked.exists());
  CHECK(transport::sweepDeadEndpoints((base.path / "absent").string()) == 0);
}

TEST_CASE("an endpoint's directory is private, locked while it lives, swept by the next start") {
  ShortBase base;
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", base.path.c_str(), 1);
  ::unsetenv("RUNTIME_DIRECTORY");
  const Leftover dead(base.path, "tern-router-Dead55", false);
  std::string dir;
  {
    transport::PrivateEndpoint here;
    dir = here.directory();
    CHECK(here.swept() == 1);
    CHECK_FALSE(dead.exists());
    CHECK(fs::path(dir).parent_path() == base.path);
    CHECK(here.endpoint() == "ipc://" + dir + "/router");
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    const int bound = boundSocket(dir + "/router", false);  // even with its socket dead
    CHECK(bound == -1);
    timespec t[2];
    ::clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= 3600;
    t[1] = t[0];
    REQUIRE(::utimensat(AT_FDCWD, dir.c_str(), t, 0) == 0);
    CHECK(transport::sweepDeadEndpoints(base.path.string(), 0) == 0);  // its lock is held
    CHECK(fs::exists(dir));
  }
  CHECK_FALSE(fs::exists(dir));
  if (old) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

TEST_CASE("a socket whose listener never accepts stops no sweep: it counts as alive") {
  // A stopped coordinator of an earlier version (no lock) with its backlog full: a blocking
  // connect would wait for ever, and every probe would queue one more connection.
  ShortBase base;
  const std::string dir = (base.path / "tern-Stop00").string();
  REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  const std::string path = dir + "/router";
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(::bind(listener, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(::listen(listener, 0) == 0);
  std::vector<int> queued;
  for (int i = 0; i < 8; ++i) {  // fill the backlog: later connects would block
    const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (::connect(c, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(c);
      break;
    }
    queued.push_back(c);
  }
  REQUIRE_FALSE(queued.empty());
  timespec t[2];
  ::clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= 3600;
  t[1] = t[0];
  REQUIRE(::utimensat(AT_FDCWD, dir.c_str(), t, 0) == 0);
  CHECK(transport::sweepDeadEndpoints(base.path.string()) == 0);
  CHECK(fs::exists(fs::symlink_status(path)));
  for (int c : queued) ::close(c);
  ::close(listener);
}
