#include "common/telemetry/http_server.hpp"

#include <doctest/doctest.h>

// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/telemetry/http_client.hpp"
#include "common/telemetry/telemetry_service.hpp"

using namespace tern::telemetry;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

HttpResponse okHandler(const HttpRequest&) {
  HttpResponse r;
  r.status = 200;
  r.body = "ok\n";
  return r;
}

// True when the server has closed the connection (a read sees end of file or a reset); false
// while it is still open and silent.
bool closedByServer(tcp::socket& s) {
  s.non_blocking(true);
  char byte;
  boost::system::error_code ec;
  s.read_some(asio::buffer(&byte, 1), ec);
  return ec && ec != asio::error::would_block && ec != asio::error::try_again;
}

std::vector<std::unique_ptr<tcp::socket>> connectSilently(asio::io_context& io, uint16_t port,
                                                          size_t count) {
  std::vector<std::unique_ptr<tcp::socket>> out;
  for (size_t i = 0; i < count; ++i) {
    out.push_back(std::make_unique<tcp::socket>(io));
    out.back()->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  return out;
}

size_t countClosed(std::vector<std::unique_ptr<tcp::socket>>& sockets) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  size_t closed = 0;
  for (auto& s : sockets) closed += closedByServer(*s);
  return closed;
}

}  // namespace

TEST_CASE("connections that never send a request cannot lock a scraper out of the endpoint") {
  HttpServerOptions options;
  options.max_connections = 4;
  options.request_timeout_seconds = 30.0;  // the test must not depend on the timeout
  HttpServer server("127.0.0.1:0", okHandler, options);
  const std::string url = "http://" + server.address() + "/metrics";

  asio::io_context io;
  const size_t idle_count = 14;
  auto idle = connectSilently(io, server.port(), idle_count);

  // The server handles connections in the order they arrived, so by the time this request is
  // answered every idle connection above has been accepted.
  const HttpResponse r = httpGet(url, 5.0);
  CHECK(r.status == 200);
  CHECK(r.body == "ok\n");

  const size_t closed = countClosed(idle);
  // At most max_connections stay open (the scraper's took a place too), and the server counts
  // exactly the idle connections it closed, as their clients saw it.
  CHECK(closed >= idle_count + 1 - options.max_connections);
  CHECK(server.idleConnectionsClosed() == closed);
  CHECK(server.connectionsRefused() == 0);
  // The oldest go first: the last connection made is still open.
  CHECK_FALSE(closedByServer(*idle.back()));
}

TEST_CASE("a daemon's metrics count the telemetry connections it closed for being silent") {
  TelemetryService telemetry([] { return 0.0; });
  const std::string address = telemetry.serve("127.0.0.1:0");
  const uint16_t port = uint16_t(std::stoul(address.substr(address.rfind(':') + 1)));
  asio::io_context io;
  auto idle = connectSilently(io, port, 40);  // the endpoint holds 32
  CHECK(httpGet("http://" + address + "/healthz", 5.0).status == 200);
  const size_t closed = countClosed(idle);
  CHECK(closed >= 40 + 1 - 32);
  telemetry.publish(tern::telemetry::NodeStatus{});
  const std::string text = telemetry.metricsText();
  CHECK(text.find("tern_http_idle_connections_closed_total " + std::to_string(closed) + "\n") !=
        std::string::npos);
  CHECK(text.find("tern_http_connections_refused_total 0\n") != std::string::npos);
}

TEST_CASE("out of file descriptors, the server waits between accepts instead of spinning") {
  HttpServer server("127.0.0.1:0", okHandler, HttpServerOptions{});
  asio::io_context io;
  // The clients' sockets are made first; then no descriptor is left for the server's accepts.
  std::vector<std::unique_ptr<tcp::socket>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<tcp::socket>(io));
    clients.back()->open(tcp::v4());
  }
  // Lower the limit to the descriptors open now, then take any number still free below it, so
  // that no accept can succeed (checked, not assumed).
  size_t open = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++open;
  }
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  struct Restore {
    rlimit limit;
    std::vector<int> taken;
    ~Restore() {
      for (int fd : taken) ::close(fd);
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
  } restore{old, {}};
  rlimit low = old;
  low.rlim_cur = open;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  for (int fd; (fd = ::dup(0)) >= 0;) restore.taken.push_back(fd);
  REQUIRE(errno == EMFILE);
  const tcp::endpoint at(asio::ip::make_address("127.0.0.1"), server.port());
  for (auto& c : clients) c->connect(at);  // queued by the kernel; every accept fails (EMFILE)
  auto cpuSeconds = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const double before = cpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double used = cpuSeconds() - before;
  for (int fd : restore.taken) ::close(fd);
  restore.taken.clear();
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
  // A spinning accept loop takes the whole half second; a paused one next to nothing.
  CHECK(used < 0.1);
  // Descriptors back: the queued connections are served.
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  asio::write(*clients[0], asio::buffer(request));
  std::string reply;
  boost::system::error_code ec;
  asio::read(*clients[0], asio::dynamic_buffer(reply), ec);
  CHECK(reply.rfind("HTTP/1.1 200", 0) == 0);
}
