#include "common/util/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "common/util/unique_fd.hpp"

namespace tern {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

void writeFileAtomically(const std::string& path, const std::string& bytes, unsigned mode) {
  writeFileAtomically(
      path, [&bytes](const ByteSink& sink) { sink(bytes); }, mode);
}

void writeFileAtomically(const std::string& path,
                         const std::function<void(const ByteSink&)>& produce, unsigned mode) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = path + ".tmp";
  // A failure after the temporary file exists removes it: on a full disk its partial bytes
  // would hold the space the other writes (metrics rows, logs) need until the next attempt.
  auto failRemoving = [&tmp](const std::string& what, const std::string& where) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    fail(what, where);
  };
  {
    util::UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode)));
    if (f.get() < 0) fail("cannot create", tmp);
    const ByteSink sink = [&](std::string_view bytes) {
      size_t done = 0;
      while (done < bytes.size()) {
        ssize_t n = ::write(f.get(), bytes.data() + done, bytes.size() - done);
        if (n < 0) {
          if (errno == EINTR) continue;
          failRemoving("write failed", tmp);
        }
        done += size_t(n);
      }
    };
    try {
      produce(sink);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
    if (::fsync(f.get()) != 0) failRemoving("fsync failed", tmp);
    int fd = f.release();
    if (::close(fd) != 0) failRemoving("close failed", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) failRemoving("rename failed", path);
  // The rename is durable only once the directory entry is on disk.
  util::UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() < 0) fail("cannot open directory", dir.string());
  if (::fsync(d.get()) != 0) fail("fsync failed", dir.string());
}

void checkWritable(const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    util::UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (f.get() < 0) fail("cannot create", tmp);
  }
  if (::unlink(tmp.c_str()) != 0) fail("cannot remove", tmp);
}

std::optional<std::string> readFileIfExists(const std::string& path) {
  util::UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail("cannot open", path);
  }
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(f.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("read failed", path);
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

}  // namespace tern
