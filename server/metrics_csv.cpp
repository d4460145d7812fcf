#include "server/metrics_csv.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "common/util/durable_file.hpp"

namespace tern::server {
namespace {

template <typename F>
std::string joinWorkers(const RoundRecord& r, F f) {
  std::string s;
  for (size_t i = 0; i < r.workers.size(); ++i) {
    if (i) s += ';';
    s += f(r.workers[i]);
  }
  return s;
}

}  // namespace

namespace {

[[noreturn]] void failOpening(const std::string& path, const std::string& what) {
  const int saved = errno;
  throw std::runtime_error(path + ": " + what + ": " + std::strerror(saved));
}

// The directory entry of a file just created survives a power loss once its directory is synced.
void syncDirectoryOf(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rows still go on; sync() reports what matters
  (void)::fsync(fd);
  ::close(fd);
}

// Whether the file's first whole line is this version's header.
bool hasOurHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string first;
  return std::getline(in, first) && !in.eof() && first == MetricsCsv::header();
}

// A row's round is its first field; a row without one is no row of ours.
bool rowBefore(std::string_view line, uint64_t resume_round) {
  uint64_t round = 0;
  const auto [end, parse_error] = std::from_chars(line.data(), line.data() + line.size(), round);
  return parse_error == std::errc() && end != line.data() + line.size() && *end == ',' &&
         round < resume_round;
}

// Hands `sink` the rows after the header of rounds before `resume_round`, in order, a piece of
// about 1 MiB at a time. Only whole lines count: a torn last line (a crash mid-write) has no
// newline.
void copyRowsBefore(const std::string& path, uint64_t resume_round, const ByteSink& sink) {
  std::ifstream in(path, std::ios::binary);
  std::string line, piece;
  std::getline(in, line);  // the header
  while (std::getline(in, line) && !in.eof()) {
    if (!rowBefore(line, resume_round)) continue;
    piece += line;
    piece += '\n';
    if (piece.size() >= (1u << 20)) {
      sink(piece);
      piece.clear();
    }
  }
  if (in.bad()) throw std::runtime_error(path + ": cannot read the metrics CSV");
  sink(piece);
}

}  // namespace

MetricsCsv::MetricsCsv(const std::string& path) { start(path, O_CREAT | O_TRUNC); }

MetricsCsv::MetricsCsv(const std::string& given, uint64_t resume_round) {
  namespace fs = std::filesystem;
  // Through a symbolic link the rows live in its target, which is the file rewritten.
  std::error_code ec;
  std::string path = given;
  if (fs::is_symlink(fs::symlink_status(given, ec))) {
    path = fs::weakly_canonical(given, ec).string();
    if (ec) throw std::runtime_error(given + ": cannot follow the link: " + ec.message());
  }
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    // A pipe or a device (a reader of the stream): nothing to keep or drop; a header marks
    // where the resumed run's rows begin.
    start(path, 0);
    return;
  }
  // Rows of another layout (or a torn header) are kept aside as PATH.old; the new file starts
  // with the header and the old rows the resumed run keeps, streamed (the file grows with the
  // run: a long run's would not fit in a small board's memory).
  const bool keep_rows = exists && hasOurHeader(path);
  if (exists && !keep_rows && st.st_size > 0) {
    std::filesystem::rename(path, path + ".old", ec);
    if (ec) throw std::runtime_error(path + ": cannot keep the old metrics CSV: " + ec.message());
  }
  // The file keeps its permissions (less the umask); a new one gets a fresh file's.
  writeFileAtomically(
      path,
      [&](const ByteSink& sink) {
        sink(header() + '\n');
        if (keep_rows) copyRowsBefore(path, resume_round, sink);
      },
      exists ? unsigned(st.st_mode & 07777) : 0644u);
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) failOpening(path, "cannot open metrics CSV for writing");
  regular_ = true;
}

void MetricsCsv::start(const std::string& path, int flags) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | flags, 0644);
  if (fd_ < 0) failOpening(path, "cannot open metrics CSV for writing");
  struct stat st {};
  regular_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  if (!append(header() + '\n')) {
    const int saved = errno;
    ::close(fd_);
    fd_ = -1;
    errno = saved;
    failOpening(path, "cannot write the metrics CSV's header");
  }
  if (regular_) syncDirectoryOf(path);
}

MetricsCsv::~MetricsCsv() {
  if (fd_ >= 0) ::close(fd_);
}

bool MetricsCsv::append(const std::string& line) {
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Cut the partial line off (a device without a size, like /dev/full, has nothing to cut).
      const int saved = errno;
      if (done > 0 && before >= 0) (void)!::ftruncate(fd_, before);
      errno = saved;
      return false;
    }
    done += size_t(n);
  }
  return true;
}

bool MetricsCsv::write(const RoundRecord& r) { return append(row(r) + '\n'); }

bool MetricsCsv::sync() { return !regular_ || ::fsync(fd_) == 0; }

std::string MetricsCsv::header() {
  return "round,time_s,train_loss,test_accuracy,upload_bytes,download_bytes,full_bytes,"
         "participants,evaluated,late_pushes,rejected,caps,shares,link_a,link_b,link_samples,"
         "levels,predicted_costs,predicted_improvements,predicted_steps,worker_ids";
}

std::string MetricsCsv::row(const RoundRecord& r) {
  return fmt::format(
      "{},{:.6f},{:.6f},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", r.round,
      r.time_s, r.train_loss, r.test_accuracy, r.upload_bytes, r.download_bytes, r.full_bytes,
      r.participants, r.evaluated ? 1 : 0, r.late_pushes, r.rejected,
      joinWorkers(r, [](const WorkerRecord& w) { return std::to_string(w.alive ? w.cap : 0); }),
      joinWorkers(r, [](const WorkerRecord& w) { return fmt::format("{:.6f}", w.share); }),
      joinWorkers(r,
                  [](const WorkerRecord& w) { return fmt::format("{:.6g}", w.link.a_seconds()); }),
      joinWorkers(r,
                  [](const WorkerRecord& w) {
                    return fmt::format("{:.6g}", w.link.b_seconds_per_packet());
                  }),
      joinWorkers(r, [](const WorkerRecord& w) { return std::to_string(w.link.samples()); }),
      joinWorkers(r, [](const WorkerRecord& w) { return std::to_string(w.level); }),
      joinWorkers(r, [](const WorkerRecord& w) { return fmt::format("{:.6g}", w.predicted_cost); }),
      joinWorkers(
          r, [](const WorkerRecord& w) { return fmt::format("{:.6g}", w.predicted_improvement); }),
      joinWorkers(r, [](const WorkerRecord& w) { return fmt::format("{:.6g}", w.predicted_step); }),
      joinWorkers(r, [](const WorkerRecord& w) { return std::to_string(w.id); }));
}

bool MetricsCsv::keepPrevious(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0 ||
      ec)
    return false;
  std::filesystem::rename(path, path + ".old", ec);
  if (ec) throw std::runtime_error(path + ": cannot keep the old metrics CSV: " + ec.message());
  return true;
}

std::string progressLine(const RoundRecord& r) {
  double pct = r.full_bytes ? 100.0 * double(r.upload_bytes) / double(r.full_bytes) : 0.0;
  std::string caps = joinWorkers(
      r, [](const WorkerRecord& w) { return w.alive ? std::to_string(w.cap) : std::string("-"); });
  std::string links = joinWorkers(r, [](const WorkerRecord& w) {
    if (w.link.samples() == 0) return std::string("?");
    return fmt::format("{:.2g}s+{:.2g}s/pkt(n={})", w.link.a_seconds(),
                       w.link.b_seconds_per_packet(), w.link.samples());
  });
  return fmt::format(
      "round {:>5} t={:7.2f}s loss={:.4f} acc={} up={} ({:.2f}% of full) "
      "workers={} caps=[{}] links=[{}]",
      r.round, r.time_s, r.train_loss,
      r.accuracy_measured ? fmt::format("{:.4f}", r.test_accuracy) : std::string("-"),
      r.upload_bytes, pct, r.participants, caps, links);
}

std::string finalLine(uint64_t rounds, std::optional<double> test_accuracy, const RunBytes& bytes) {
  return fmt::format(
      "final: rounds={} test_accuracy={} upload_bytes={} download_bytes={} full_bytes={}", rounds,
      test_accuracy ? fmt::format("{:.4f}", *test_accuracy) : std::string("none"), bytes.upload,
      bytes.download, bytes.full);
}

}  // namespace tern::server
