// The checkpoint on disk: two generations, a damaged newest falls back to the one before, no
// usable one is an error, only regular files are read (never hanging on one), and failed writes
// are reported at a bounded rate until one succeeds.
#include "server/checkpoint_file.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/ml/model.hpp"

using namespace tern;
using namespace tern::server;
namespace fs = std::filesystem;

namespace {

CoordinatorOptions options() {
  config::CoordinatorSettings s;
  s.model.kind = "softmax";
  s.model.features = 3;
  s.model.classes = 2;
  return coordinatorOptions(s);
}

CheckpointState stateAt(uint64_t round) {
  CheckpointState c;
  c.round = round;
  c.model = options().model;
  const size_t n = ml::makeModel(c.model)->numParams();
  c.parameters.assign(n, 0.5f + float(round));
  c.velocity.assign(n, -0.25f);
  c.allocation_method = "uniform";
  return c;
}

// This process's own scratch directory, removed at exit.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("tern-ckpt-file-" + std::to_string(::getpid()));
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

enum class Outcome { kRead, kRefused, kOutOfMemory, kOtherError, kHung };

// readCheckpointFile(path) in a child process given 5 s: a hang fails the test instead of
// blocking it.
Outcome readInChild(const std::string& path) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 3;
    try {
      (void)readCheckpointFile(path, checkpointSizeLimit(options().model));
      code = 0;
    } catch (const std::bad_alloc&) {
      code = 2;
    } catch (const std::runtime_error&) {
      code = 1;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  for (int i = 0; i < 500; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      if (!WIFEXITED(status)) return Outcome::kOtherError;
      return Outcome(WEXITSTATUS(status));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return Outcome::kHung;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Log lines written while `f` runs.
std::string logOf(const std::function<void()>& f) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  auto capture = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spdlog::set_default_logger(capture);
  f();
  spdlog::set_default_logger(previous);
  return out.str();
}

size_t lines(const std::string& text, const std::string& with) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(with) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("each checkpoint write keeps the one before it as PATH.prev") {
  Scratch s;
  const std::string path = s.path("c.ckpt");
  writeCheckpointGenerations(path, encodeCheckpoint(stateAt(1)));
  CHECK_FALSE(fs::exists(previousCheckpointPath(path)));
  writeCheckpointGenerations(path, encodeCheckpoint(stateAt(2)));
  writeCheckpointGenerations(path, encodeCheckpoint(stateAt(3)));
  CHECK(contents(path) == encodeCheckpoint(stateAt(3)));
  CHECK(contents(previousCheckpointPath(path)) == encodeCheckpoint(stateAt(2)));
  const auto loaded = loadCheckpoint(path, options());
  REQUIRE(loaded.has_value());
  CHECK(loaded->state.round == 3);
  CHECK_FALSE(loaded->fell_back);
}

TEST_CASE("a damaged newest checkpoint falls back to the previous one, loudly") {
  Scratch s;
  const std::string path = s.path("c.ckpt");
  writeCheckpointGenerations(path, encodeCheckpoint(stateAt(4)));
  writeCheckpointGenerations(path, encodeCheckpoint(stateAt(5)));
  std::string damaged = contents(path);
  damaged[damaged.size() / 2] ^= 0x01;
  put(path, damaged);
  std::optional<LoadedCheckpoint> loaded;
  const std::string log = logOf([&] { loaded = loadCheckpoint(path, options()); });
  REQUIRE(loaded.has_value());
  CHECK(loaded->fell_back);
  CHECK(loaded->state.round == 4);
  CHECK(loaded->state.parameters == stateAt(4).parameters);
  CHECK(lines(log, "[error]") == 1);
  CHECK(lines(log, "resumed from the previous one") == 1);
  // The damaged file is kept aside: the next write does not make it the previous generation.
  CHECK_FALSE(fs::exists(path));
  CHECK(contents(damagedCheckpointPath(path)) == damaged);
  writeCheckpointGenerations(path, encodeCheckpoint(stateAt(5)));
  CHECK(loadCheckpoint(path, options())->state.round == 5);
  CHECK(contents(previousCheckpointPath(path)) == encodeCheckpoint(stateAt(4)));
}

TEST_CASE("a newest checkpoint missing beside a previous one resumes the previous one") {
  Scratch s;
  const std::string path = s.path("c.ckpt");
  CHECK_FALSE(loadCheckpoint(path, options()).has_value());  // a first start
  put(previousCheckpointPath(path), encodeCheckpoint(stateAt(7)));
  const auto loaded = loadCheckpoint(path, options());
  REQUIRE(loaded.has_value());
  CHECK(loaded->fell_back);
  CHECK(loaded->state.round == 7);
}

TEST_CASE("with no usable generation the load fails, naming each one's problem") {
  Scratch s;
  const std::string path = s.path("c.ckpt");
  const std::string good = encodeCheckpoint(stateAt(3));
  put(path, good.substr(0, good.size() - 1));
  CHECK(errorOf([&] { loadCheckpoint(path, options()); }).find(".prev: missing") !=
        std::string::npos);
  std::string flipped = good;
  flipped[20] ^= 0x40;
  put(previousCheckpointPath(path), flipped);
  const std::string msg = errorOf([&] { loadCheckpoint(path, options()); });
  CHECK(msg.find("no usable checkpoint") != std::string::npos);
  CHECK(msg.find("whole-file checksum") != std::string::npos);
  CHECK(fs::exists(path));  // nothing moved when nothing is restored
  fs::remove(path);
  CHECK(errorOf([&] { loadCheckpoint(path, options()); }).find(": missing;") != std::string::npos);
}

TEST_CASE("a checkpoint path that is no regular file is refused at once, never read or waited on") {
  Scratch s;
  const std::string dangling = s.path("dangling.ckpt");
  fs::create_symlink(s.path("nothing-here"), dangling);
  CHECK(errorOf([&] { loadCheckpoint(dangling, options()); }).find("symbolic link to nothing") !=
        std::string::npos);
  const std::string linked = s.path("linked.ckpt");
  put(s.path("real.ckpt"), encodeCheckpoint(stateAt(1)));
  fs::create_symlink(s.path("real.ckpt"), linked);
  CHECK(errorOf([&] { loadCheckpoint(linked, options()); }).find("symbolic link") !=
        std::string::npos);
  const std::string dir = s.path("dir.ckpt");
  fs::create_directory(dir);
  CHECK(errorOf([&] { loadCheckpoint(dir, options()); }).find("is a directory") !=
        std::string::npos);
  const std::string fifo = s.path("fifo.ckpt");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& p :
       {dangling, dir, fifo, std::string("/dev/zero"), std::string("/dev/null")}) {
    CAPTURE(p);
    CHECK(readInChild(p) == Outcome::kRefused);
  }
  // A regular file larger than any checkpoint of the model is refused before it is read.
  const std::string huge = s.path("huge.ckpt");
  put(huge, "");
  fs::resize_file(huge, checkpointSizeLimit(options().model) + 1);
  CHECK(errorOf([&] { loadCheckpoint(huge, options()); }).find("more than a checkpoint") !=
        std::string::npos);
}

TEST_CASE("failed checkpoint writes are logged at a bounded rate and reported until one works") {
  Scratch s;
  const std::string path = s.path("c.ckpt");
  CheckpointWriter writer(path);
  const std::string bytes = encodeCheckpoint(stateAt(1));
  CHECK(writer.write(bytes, 1, 0.0));
  fs::create_directory(path + ".tmp");  // the next temporary file cannot be created
  const std::string log = logOf([&] {
    for (int i = 0; i < 100; ++i) CHECK_FALSE(writer.write(bytes, 2, 10.0 + i * 0.1));
    CHECK_FALSE(writer.write(bytes, 3, 80.0));  // past the interval: one more line
  });
  CHECK(lines(log, "not written") == 2);
  CHECK(lines(log, "(99 more failed write(s) since the last report)") == 1);
  CHECK(writer.failures() == 101);
  CHECK(writer.failure().find("c.ckpt.tmp") != std::string::npos);
  fs::remove(path + ".tmp");
  CHECK(writer.write(bytes, 4, 81.0));
  CHECK(writer.failure().empty());
  // A new failure after a success is reported at once.
  fs::create_directory(path + ".tmp");
  CHECK(lines(logOf([&] { writer.write(bytes, 5, 81.5); }), "not written") == 1);
}

// AddressSanitizer's own checks (UBSan's vptr check reading a vtable) open a pipe to test memory:
// with no descriptor left they report a false error, so the sanitized build leaves this case to
// the others (Release and ThreadSanitizer run it).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerNeedsDescriptors = true;
#else
constexpr bool kSanitizerNeedsDescriptors = false;
#endif

TEST_CASE("out of file descriptors, a checkpoint write fails and says so" *
          doctest::skip(kSanitizerNeedsDescriptors)) {
  Scratch s;
  const std::string path = s.path("c.ckpt");
  CheckpointWriter writer(path);
  const std::string bytes = encodeCheckpoint(stateAt(1));
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  const int lowest_free = ::open("/dev/null", O_RDONLY);
  REQUIRE(lowest_free >= 0);
  ::close(lowest_free);
  rlimit exhausted = before;
  exhausted.rlim_cur = rlim_t(lowest_free);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &exhausted) == 0);
  bool written = true;
  (void)logOf([&] { written = writer.write(bytes, 1, 0.0); });
  ::setrlimit(RLIMIT_NOFILE, &before);
  CHECK_FALSE(written);
  CHECK(writer.failure().find("Too many open files") != std::string::npos);
  CHECK(writer.write(bytes, 2, 1.0));
  CHECK(writer.failure().empty());
}
