#include "common/transport/private_endpoint.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common/util/unique_fd.hpp"

namespace tern::transport {

namespace {

// Directories are made as "tern-router-XXXXXX"; "tern-XXXXXX" is how earlier versions named
// theirs (only one holding a dead socket is taken for such a directory).
constexpr char kPrefix[] = "tern-router-";
constexpr char kOldPrefix[] = "tern-";
constexpr size_t kSuffixChars = 6;  // mkdtemp's XXXXXX

// True for a name mkdtemp makes of prefix + "XXXXXX".
bool madeAs(const std::string& name, const char* prefix) {
  const size_t n = std::strlen(prefix);
  if (name.size() != n + kSuffixChars || name.compare(0, n, prefix) != 0) return false;
  for (size_t i = n; i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

// The names in the directory open at fd (without . and ..); nullopt if it cannot be read.
std::optional<std::vector<std::string>> entries(int fd) {
  const int copy = ::dup(fd);  // closedir closes what fdopendir took
  if (copy < 0) return std::nullopt;
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    ::close(copy);
    return std::nullopt;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

// True when nothing listens on the unix socket `router` in the directory open at dir_fd (the
// connection is refused). Non-blocking: a listener that does not accept (stopped, its backlog
// full) answers EAGAIN and counts as alive, never as a wait.
bool nobodyListens(int dir_fd) {
  const std::string path = "/proc/self/fd/" + std::to_string(dir_fd) + "/router";
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) return false;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  util::UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.get() < 0) return false;
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) return false;
  return errno == ECONNREFUSED;
}

// Whether the directory `name` under the base open at base_fd is a dead endpoint's (see
// sweepDeadEndpoints); if so, its socket is unlinked and the directory removed. An empty one
// counts only under the current prefix (an older version's name is too common to take alone).
bool removeIfDead(int base_fd, const std::string& name, double min_age) {
  const bool current = madeAs(name, kPrefix);
  if (!current && !madeAs(name, kOldPrefix)) return false;
  util::UniqueFd fd(
      ::openat(base_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return false;
  if (st.st_uid != ::geteuid() || (st.st_mode & 07777) != 0700) return false;
  if (double(std::time(nullptr) - st.st_mtime) < min_age) return false;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return false;  // its coordinator runs
  const auto names = entries(fd.get());
  if (!names || names->size() > 1 || (names->empty() && !current)) return false;
  if (names->size() == 1) {
    struct stat sock {};
    if ((*names)[0] != "router" || ::fstatat(fd.get(), "router", &sock, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISSOCK(sock.st_mode))
      return false;
    // A coordinator from before the lock holds none: its socket says whether it runs.
    if (!nobodyListens(fd.get())) return false;
    if (::unlinkat(fd.get(), "router", 0) != 0) return false;
  }
  return ::unlinkat(base_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

// $RUNTIME_DIRECTORY, $TMPDIR (when set to an absolute path short enough for the socket's) and
// /tmp, in that order.
std::vector<std::string> candidateBases() {
  std::vector<std::string> bases;
  for (const char* var : {"RUNTIME_DIRECTORY", "TMPDIR"}) {
    const char* v = std::getenv(var);
    // The socket's path must fit sockaddr_un's 108 bytes with "/tern-router-XXXXXX/router".
    if (v && *v == '/' && std::strlen(v) < 80 && std::strchr(v, ':') == nullptr) bases.push_back(v);
  }
  bases.push_back("/tmp");
  return bases;
}

}  // namespace

size_t sweepDeadEndpoints(const std::string& base, double min_age_seconds) {
  util::UniqueFd base_fd(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (base_fd.get() < 0) return 0;
  const auto names = entries(base_fd.get());
  if (!names) return 0;
  size_t removed = 0;
  for (const auto& name : *names)
    if (removeIfDead(base_fd.get(), name, min_age_seconds)) ++removed;
  return removed;
}

PrivateEndpoint::PrivateEndpoint() {
  std::string failures;
  for (const auto& base : candidateBases()) {  // the first that takes a directory
    swept_ += sweepDeadEndpoints(base);
    std::string templ = base + "/" + kPrefix + "XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      failures += " " + base + ": " + std::strerror(errno) + ";";
      continue;
    }
    dir_ = templ;
    endpoint_ = "ipc://" + dir_ + "/router";
    lock_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      const std::string why = std::strerror(errno);
      if (lock_fd_ >= 0) ::close(lock_fd_);
      ::rmdir(dir_.c_str());
      throw std::runtime_error("cannot lock " + dir_ + ", the ROUTER's directory: " + why);
    }
    return;
  }
  throw std::runtime_error("cannot make a private directory for the ROUTER's socket:" + failures);
}

PrivateEndpoint::~PrivateEndpoint() {
  ::unlink((dir_ + "/router").c_str());
  ::rmdir(dir_.c_str());
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

}  // namespace tern::transport
