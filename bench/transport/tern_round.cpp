#include "bench/transport/tern_round.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace tern::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// A child process with stdout and stderr in files of the run's directory; killed when dropped.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const fs::path& log) : log_(log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + strerror(rc));
  }
  ~Child() { stop(SIGKILL); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  // Whether it has exited (reaped).
  bool exited() {
    if (pid_ <= 0) return true;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) pid_ = -1;
    return pid_ <= 0;
  }
  void stop(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  // The last lines it wrote, for an error message.
  std::string tail() const {
    std::ifstream in(log_);
    std::string all((std::istreambuf_iterator<char>(in)), {});
    return all.size() > 1500 ? all.substr(all.size() - 1500) : all;
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
};

// The coordinator's minor page faults so far (/proc/PID/stat field 10, getrusage's ru_minflt).
uint64_t minorFaults(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), {});
  std::istringstream rest(all.substr(all.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 10; ++i) rest >> field;  // fields 3..10
  return std::stoull(field);
}

void writeFile(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

std::string coordinatorYaml(const fs::path& dir, const TernSetup& s, const TernCase& c) {
  std::ostringstream y;
  y << "bind: tcp://127.0.0.1:0\nendpoint_file: " << (dir / "endpoint").string()
    << "\nmin_workers: " << c.workers << "\nmax_workers: " << c.workers
    << "\nmax_rounds: 1000000\nround_deadline_seconds: 60\nheartbeat_seconds: 2\n"
    << "worker_patience_seconds: 60\neval_every: 1000000\nmodel: " << c.model
    << "\noptimizer: {lr: 0.1, momentum: 0.9}\ntraining: {batch_size: 32, seed: 3}\n"
    << "allocation: {method: uniform, mean_ratio: " << c.mean_ratio << "}\n"
    << "test_data: {format: idx, images: " << s.data_dir
    << "/t10k-images-idx3-ubyte.gz, labels: " << s.data_dir
    << "/t10k-labels-idx1-ubyte.gz}\nlogging: {level: warn}\nsecurity: none\n";
  return y.str();
}

std::string workerYaml(const TernSetup& s, const TernCase& c) {
  std::ostringstream y;
  y << "name: load\ncoordinator: tcp://127.0.0.1:1\ndata:\n  format: idx\n  images: " << s.data_dir
    << "/train-images-idx3-ubyte.gz\n  labels: " << s.data_dir
    << "/train-labels-idx1-ubyte.gz\n  shard: {index: 0, total: 20}\n"
    << "compression: {name: " << c.compression << ", error_feedback: auto}\n"
    << "tuning: {method: fixed}\nheartbeat_seconds: 2\ncoordinator_patience_seconds: 60\n"
    << "logging: {level: error}\nsecurity: none\n";
  return y.str();
}

}  // namespace

namespace {

// Columns 5-8 of one metrics CSV row: cumulative bytes, and the round's pushes.
struct Row {
  uint64_t up = 0, down = 0, full = 0;
  size_t participants = 0;
};

Row parseRow(const std::string& line) {
  std::vector<std::string> f;
  std::istringstream in(line);
  for (std::string cell; f.size() < 8 && std::getline(in, cell, ',');) f.push_back(cell);
  if (f.size() < 8) throw std::runtime_error("short metrics row: " + line);
  return {std::stoull(f[4]), std::stoull(f[5]), std::stoull(f[6]), size_t(std::stoull(f[7]))};
}

// The rows a growing CSV file gained since the last call; a partial last line waits.
class CsvTail {
 public:
  explicit CsvTail(fs::path p) : path_(std::move(p)) {}
  ~CsvTail() {
    if (fd_ >= 0) ::close(fd_);
  }
  std::vector<Row> fresh() {
    if (fd_ < 0 && (fd_ = ::open(path_.c_str(), O_RDONLY)) < 0) return {};
    char buf[65536];
    ssize_t n;
    while ((n = ::pread(fd_, buf, sizeof buf, offset_)) > 0) {
      pending_.append(buf, size_t(n));
      offset_ += n;
    }
    std::vector<Row> rows;
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (header_seen_) rows.push_back(parseRow(line));
      header_seen_ = true;
    }
    return rows;
  }

 private:
  fs::path path_;
  int fd_ = -1;
  off_t offset_ = 0;
  std::string pending_;
  bool header_seen_ = false;
};

std::string waitForEndpoint(const fs::path& file, Child& coordinator) {
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(file);
    std::string ep;
    if (in >> ep && !ep.empty()) return ep;
    if (coordinator.exited())
      throw std::runtime_error("the coordinator exited: " + coordinator.tail());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("the coordinator did not write its endpoint in 30 s");
}

struct Mark {
  Clock::time_point at;
  uint64_t faults = 0;
  Row row;
};

// Watches the CSV until `total` rows; marks the `warmup`-th and the last.
std::pair<Mark, Mark> watch(const fs::path& csv, Child& coord, Child& load, const TernSetup& s,
                            const TernCase& c) {
  CsvTail tail(csv);
  Mark first, last;
  int seen = 0, total = s.warmup + s.rounds;
  auto deadline = Clock::now() + std::chrono::minutes(10);
  while (seen < total) {
    for (const Row& r : tail.fresh()) {
      Mark m{Clock::now(), minorFaults(coord.pid()), r};
      if (++seen > s.warmup && r.participants != c.workers)
        throw std::runtime_error("round " + std::to_string(seen) + " closed with " +
                                 std::to_string(r.participants) + " of " +
                                 std::to_string(c.workers) + " workers");
      if (seen == s.warmup) first = m;
      if (seen == total) last = m;
      if (seen == total) break;
    }
    if (seen >= total) break;
    if (coord.exited()) throw std::runtime_error("the coordinator exited: " + coord.tail());
    if (load.exited()) throw std::runtime_error("tern-loadgen exited: " + load.tail());
    if (Clock::now() > deadline) throw std::runtime_error("no progress for 10 minutes");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return {first, last};
}

}  // namespace

TernResult ternRound(const TernSetup& s, const TernCase& c) {
  if (s.warmup < 1 || s.rounds < 1) throw std::runtime_error("warmup and rounds must be >= 1");
  char tmpl[] = "/tmp/tern-bench-transport.XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("cannot make a directory in /tmp");
  fs::path dir(tmpl);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  writeFile(dir / "coord.yaml", coordinatorYaml(dir, s, c));
  writeFile(dir / "worker.yaml", workerYaml(s, c));
  fs::path bin(s.bin_dir);
  Child coord({(bin / "tern-coordinator").string(), "--config", (dir / "coord.yaml").string(),
               "--metrics-csv", (dir / "metrics.csv").string()},
              dir / "coord.log");
  std::string endpoint = waitForEndpoint(dir / "endpoint", coord);
  Child load({(bin / "tern-loadgen").string(), "--config", (dir / "worker.yaml").string(),
              "--coordinator", endpoint, "--workers", std::to_string(c.workers), "--rounds",
              std::to_string(s.warmup + s.rounds + 2)},
             dir / "load.log");
  auto [a, b] = watch(dir / "metrics.csv", coord, load, s, c);
  double pushes = double(c.workers) * s.rounds;
  TernResult r;
  r.round_ms = std::chrono::duration<double, std::milli>(b.at - a.at).count() / s.rounds;
  r.faults_per_round = double(b.faults - a.faults) / s.rounds;
  r.params = size_t(double(b.row.full - a.row.full) / (4 * pushes));
  r.up_bytes = size_t(double(b.row.up - a.row.up) / pushes);
  r.down_bytes = size_t(double(b.row.down - a.row.down) / pushes);
  return r;
}

}  // namespace tern::bench
