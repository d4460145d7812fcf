#include "common/telemetry/http_server.hpp"

#include <doctest/doctest.h>

// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include <sys/resource.h>
#include <unistd.h>

#include <array>
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

// Sends `request` on a new connection and returns everything read until the server closed it.
std::string exchange(uint16_t port, const std::string& request) {
  asio::io_context io;
  tcp::socket s(io);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(s, asio::buffer(request));
  std::string reply;
  boost::system::error_code ec;
  asio::read(s, asio::dynamic_buffer(reply), ec);
  return reply;
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Answers one connection with `reply` (raw bytes, well-formed or not) and closes it.
class OneShotServer {
 public:
  explicit OneShotServer(std::string reply) : reply_(std::move(reply)) {
    thread_ = std::thread([this] {
      tcp::socket s(io_);
      acceptor_.accept(s);
      std::array<char, 4096> buf{};
      boost::system::error_code ec;
      s.read_some(asio::buffer(buf), ec);
      asio::write(s, asio::buffer(reply_), ec);
      s.shutdown(tcp::socket::shutdown_both, ec);
    });
  }
  ~OneShotServer() { thread_.join(); }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/status";
  }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_{io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::string reply_;
  std::thread thread_;
};

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

TEST_CASE("a response carries its status, type and length, closes, and HEAD gets no body") {
  HttpServer server("127.0.0.1:0", [](const HttpRequest&) {
    HttpResponse r;
    r.status = 503;
    r.content_type = "application/json";
    r.body = "{\"a\":1}\r\n\r\nmore";
    return r;
  });
  const std::string get = exchange(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(startsWith(get, "HTTP/1.1 503 Service Unavailable\r\n"));
  CHECK(get.find("Content-Length: 15\r\n") != std::string::npos);
  CHECK(get.find("Connection: close\r\n") != std::string::npos);
  CHECK(get.find("Cache-Control: no-store\r\n") != std::string::npos);
  CHECK(get.substr(get.size() - 15) == "{\"a\":1}\r\n\r\nmore");
  const HttpResponse back = httpGet("http://" + server.address() + "/", 5.0);
  CHECK(back.status == 503);
  CHECK(back.content_type == "application/json");
  CHECK(back.body == "{\"a\":1}\r\n\r\nmore");

  const std::string head = exchange(server.port(), "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(head.find("Content-Length: 15\r\n") != std::string::npos);
  CHECK(head.substr(head.size() - 4) == "\r\n\r\n");
}

TEST_CASE("malformed, oversized and unsupported requests get their status over the wire") {
  TelemetryService telemetry([] { return 0.0; });
  const std::string address = telemetry.serve("127.0.0.1:0");
  const uint16_t port = uint16_t(std::stoul(address.substr(address.rfind(':') + 1)));
  struct Case {
    std::string request;
    std::string status_line;
  } cases[] = {
      {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n"},
      {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", "HTTP/1.1 505 "},
      {"GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(9000, 'a') + "\r\n\r\n", "HTTP/1.1 431 "},
      {"POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", "HTTP/1.1 413 "},
      {"POST /metrics HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 501 "},
      {"POST /metrics HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 405 "},
      {"GET /nope HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 404 "},
      {"GET /healthz HTTP/1.0\r\n\r\n", "HTTP/1.1 200 "},
      // A head ended by a bare LF: answered at once, not left to the connection's deadline.
      {"GET /healthz HTTP/1.1\r\nHost: a\r\n\n", "HTTP/1.1 400 "},
  };
  for (const auto& c : cases) {
    CAPTURE(c.request.substr(0, 40));
    const std::string reply = exchange(port, c.request);
    CHECK(startsWith(reply, c.status_line));
    CHECK(reply.find("Connection: close\r\n") != std::string::npos);
  }
  const std::string refused = exchange(port, "POST / HTTP/1.1\r\nHost: a\r\n\r\n");
  CHECK(refused.find("Allow: GET, HEAD\r\n") != std::string::npos);
}

TEST_CASE("a client that trickles its request is dropped at the deadline, others are served") {
  HttpServerOptions options;
  options.request_timeout_seconds = 0.3;
  HttpServer server("127.0.0.1:0", okHandler, options);
  asio::io_context io;
  auto slow = connectSilently(io, server.port(), 1);
  asio::write(*slow[0], asio::buffer(std::string("GET /metrics HT")));
  CHECK(httpGet("http://" + server.address() + "/healthz", 5.0).status == 200);
  CHECK_FALSE(closedByServer(*slow[0]));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(closedByServer(*slow[0]));
}

TEST_CASE("the client refuses responses cut short, malformed or larger than its limit") {
  const char* bad[] = {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
                       "HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 200 OK\r\n"};
  for (const char* reply : bad) {
    CAPTURE(reply);
    OneShotServer peer(reply);
    CHECK_THROWS_AS(httpGet(peer.url(), 5.0), std::runtime_error);
  }
  {
    OneShotServer peer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
    CHECK_THROWS_AS(httpGet(peer.url(), 5.0, 50), std::runtime_error);
  }
  {
    OneShotServer peer("HTTP/1.1 204 \r\n\r\n");  // no reason phrase
    CHECK(httpGet(peer.url(), 5.0).status == 204);
  }
  {
    OneShotServer peer("HTTP/1.1 200 OK\r\nContent-Type: text/x\r\n\r\nuntil close");
    const HttpResponse r = httpGet(peer.url(), 5.0);
    CHECK(r.content_type == "text/x");
    CHECK(r.body == "until close");
  }
}
