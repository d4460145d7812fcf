// The daemons' stop handling, each case in a child process of its own (a signal handler and an
// exit are process-wide): a first SIGTERM sets the stop flag and the process goes on; a second
// ends it as SIGTERM's default would; start-up work interrupted by a stop ends the process at
// once with status 0.
#include "common/daemon/signals.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <future>
#include <stdexcept>
#include <thread>

using namespace tern::daemon;

namespace {

// Runs body in a child (killed by SIGALRM after 10 s should it hang) and returns its wait status
// and what it wrote to `out`.
std::pair<int, std::string> inChild(const std::function<void(FILE* out)>& body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    alarm(10);
    FILE* out = fdopen(fds[1], "w");
    setvbuf(out, nullptr, _IONBF, 0);
    body(out);
    std::fflush(nullptr);
    _exit(77);  // body returned: not what any case below expects
  }
  close(fds[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return {status, text};
}

}  // namespace

TEST_CASE("a first SIGTERM asks the daemon to stop, a second ends it as the default would") {
  auto [status, text] = inChild([](FILE* out) {
    installSignalHandlers();
    std::raise(SIGTERM);
    std::fprintf(out, "first:%d ", int(stopRequested().load()));
    std::raise(SIGTERM);
    std::fprintf(out, "second survived");
  });
  CHECK(text == "first:1 ");
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

TEST_CASE("SIGHUP asks for a reload and does not stop") {
  auto [status, text] = inChild([](FILE* out) {
    installSignalHandlers();
    std::raise(SIGHUP);
    std::fprintf(out, "reload:%d stop:%d", int(reloadRequested().load()),
                 int(stopRequested().load()));
    _exit(0);
  });
  CHECK(text == "reload:1 stop:0");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("start-up work ends the process with status 0 when a stop comes before it is done") {
  SUBCASE("stopped: on_stop runs, the process exits 0 while the work is still under way") {
    auto [status, text] = inChild([](FILE* out) {
      installSignalHandlers();
      std::promise<void> never;
      std::thread stopper([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::raise(SIGTERM);
      });
      stopper.detach();
      exitIfStoppedDuring(
          [&] {
            never.get_future().wait();  // work that does not end by itself
            return 1;
          },
          [out] { std::fprintf(out, "stopped"); });
      std::fprintf(out, " returned");
    });
    CHECK(text == "stopped");
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  SUBCASE("not stopped: the work's result, or its exception") {
    auto [status, text] = inChild([](FILE* out) {
      installSignalHandlers();
      const int v = exitIfStoppedDuring([] { return 42; }, [out] { std::fprintf(out, "stopped"); });
      std::fprintf(out, "%d ", v);
      try {
        exitIfStoppedDuring([]() -> int { throw std::runtime_error("bad file"); }, [] {});
      } catch (const std::runtime_error& e) {
        std::fprintf(out, "%s", e.what());
      }
      _exit(0);
    });
    CHECK(text == "42 bad file");
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}
