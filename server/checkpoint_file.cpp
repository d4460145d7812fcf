#include "server/checkpoint_file.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/util/durable_file.hpp"
#include "common/util/unique_fd.hpp"

namespace tern::server {
namespace {

[[noreturn]] void failErrno(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

const char* kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Refuses anything at `path` but a regular file; false when nothing is there.
bool regularFileAt(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    failErrno(path, "cannot inspect the checkpoint");
  }
  if (S_ISLNK(st.st_mode)) {
    // Each checkpoint replaces the path by a rename, which would replace the link itself.
    struct stat target {};
    const bool dangling = ::stat(path.c_str(), &target) != 0;
    throw std::runtime_error(path + ": the checkpoint path is a symbolic link" +
                             std::string(dangling ? " to nothing" : "") +
                             ": it must name a regular file (or nothing, to start afresh)");
  }
  if (!S_ISREG(st.st_mode)) {
    throw std::runtime_error(path + ": the checkpoint path is " + std::string(kindOf(st.st_mode)) +
                             ": it must name a regular file (or nothing, to start afresh)");
  }
  return true;
}

// Keeps the present newest file as PATH.prev: a hard link renamed into place (never a moment
// without either), or a copy where the file system has no hard links.
void keepPrevious(const std::string& path) {
  const std::string prev = previousCheckpointPath(path);
  const std::string staged = prev + ".tmp";
  ::unlink(staged.c_str());
  if (::link(path.c_str(), staged.c_str()) == 0) {
    if (::rename(staged.c_str(), prev.c_str()) != 0) failErrno(prev, "rename failed");
    return;
  }
  if (errno == ENOENT) return;  // no newest yet
  if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP && errno != EMLINK) {
    failErrno(staged, "cannot link");
  }
  if (auto bytes = readFileIfExists(path)) writeFileAtomically(prev, *bytes);
}

// A generation's state, or why it is unusable; nothing when the file does not exist.
struct Generation {
  bool exists = false;
  std::optional<CheckpointState> state;
  std::string problem;
};

Generation readGeneration(const std::string& path, const CoordinatorOptions& options) {
  Generation g;
  const auto bytes = readCheckpointFile(path, checkpointSizeLimit(options.model));
  if (!bytes) return g;
  g.exists = true;
  try {
    g.state = decodeCheckpoint(*bytes, options);
  } catch (const std::exception& e) {
    g.problem = e.what();
  }
  return g;
}

}  // namespace

std::string previousCheckpointPath(const std::string& path) { return path + ".prev"; }
std::string damagedCheckpointPath(const std::string& path) { return path + ".damaged"; }

std::optional<std::string> readCheckpointFile(const std::string& path, size_t max_bytes) {
  if (!regularFileAt(path)) return std::nullopt;
  // O_NONBLOCK and O_NOFOLLOW: what replaced the file since it was inspected cannot make the
  // open hang (a FIFO) or follow a link.
  util::UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (f.get() < 0) failErrno(path, "cannot open the checkpoint");
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) failErrno(path, "cannot inspect the checkpoint");
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(path + ": not a regular file");
  if (uint64_t(st.st_size) > max_bytes) {
    throw std::runtime_error(path + ": the checkpoint is " + std::to_string(st.st_size) +
                             " bytes, more than a checkpoint of this model can be (" +
                             std::to_string(max_bytes) + ")");
  }
  std::string out(size_t(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(f.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failErrno(path, "cannot read the checkpoint");
    if (n == 0) break;  // shrunk meanwhile: the codec refuses what is left
    done += size_t(n);
  }
  out.resize(done);
  return out;
}

void writeCheckpointGenerations(const std::string& path, const std::string& bytes) {
  keepPrevious(path);
  writeFileAtomically(path, bytes);
}

std::optional<LoadedCheckpoint> loadCheckpoint(const std::string& path,
                                               const CoordinatorOptions& options) {
  const std::string prev_path = previousCheckpointPath(path);
  Generation newest = readGeneration(path, options);
  if (newest.state) return LoadedCheckpoint{std::move(*newest.state), false};
  Generation prev = readGeneration(prev_path, options);
  if (!newest.exists && !prev.exists) return std::nullopt;
  const std::string newest_problem = newest.exists ? newest.problem : "missing";
  if (!prev.state) {
    throw std::runtime_error(
        "no usable checkpoint: " + path + ": " + newest_problem + "; " + prev_path + ": " +
        (prev.exists ? prev.problem : "missing") +
        " (remove both to start training afresh, or restore one from a backup)");
  }
  if (newest.exists) {
    // Moved aside, so the next checkpoint does not make the damaged file the previous one.
    const std::string aside = damagedCheckpointPath(path);
    if (::rename(path.c_str(), aside.c_str()) != 0) failErrno(path, "cannot move aside");
  }
  spdlog::error(
      "checkpoint {} is unusable ({}): resumed from the previous one, {}; the rounds since are "
      "redone{}",
      path, newest_problem, prev_path,
      newest.exists ? "; the damaged file is kept as " + damagedCheckpointPath(path) : "");
  return LoadedCheckpoint{std::move(*prev.state), true};
}

bool CheckpointWriter::write(const std::string& bytes, uint64_t round, double now) {
  try {
    writeCheckpointGenerations(path_, bytes);
  } catch (const std::exception& e) {
    failure_ = e.what();
    ++failures_;
    if (log_.allow(now)) {
      const uint64_t unreported = failures_ - failures_logged_ - 1;
      spdlog::error(
          "checkpoint at round {} not written: {}; a restart resumes from the last one "
          "written{}",
          round, failure_,
          unreported ? fmt::format(" ({} more failed write(s) since the last report)", unreported)
                     : "");
      failures_logged_ = failures_;
    }
    return false;
  }
  if (!failure_.empty()) {
    spdlog::info("checkpoint written again at round {}", round);
    failure_.clear();
    failures_logged_ = failures_;
    log_ = daemon::Throttle(60.0);  // the next failure is reported at once
  }
  spdlog::debug("checkpoint written at round {}", round);
  return true;
}

}  // namespace tern::server
