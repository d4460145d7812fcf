#include "common/telemetry/http_server.hpp"

// clang-format off
// Boost 1.74's asio uses std::exchange without including <utility> (fixed in later releases).
#include <utility>
#include <boost/asio.hpp>
#include <boost/beast/http.hpp>
// clang-format on

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <stdexcept>
#include <thread>

namespace tern::telemetry {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServer::Handler& handler, const HttpServerOptions& opts,
          size_t& open)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        handler_(handler),
        reader_(opts.max_head_bytes),
        open_(open) {
    ++open_;
    timer_.expires_after(std::chrono::milliseconds(int64_t(opts.request_timeout_seconds * 1000)));
  }
  ~Session() { --open_; }

  // Still waiting for its request head: the connections an idle or slow client holds.
  bool reading() const { return reading_; }
  // Closes the connection if it is still reading; the pending read then ends the session.
  bool evictIfReading() {
    if (!reading_) return false;
    reading_ = false;
    boost::system::error_code ignored;
    socket_.close(ignored);
    return true;
  }

  void start() {
    auto self = shared_from_this();
    timer_.async_wait([self](boost::system::error_code ec) {
      if (!ec) {
        boost::system::error_code ignored;
        self->socket_.close(ignored);
      }
    });
    read();
  }

 private:
  void read() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(buf_), [self](boost::system::error_code ec, size_t n) {
      if (ec) return self->finish();
      auto state = self->reader_.feed(std::string_view(self->buf_.data(), n));
      if (state == HttpRequestReader::State::kIncomplete) return self->read();
      self->reading_ = false;
      self->respond(state == HttpRequestReader::State::kComplete ? self->answer() : self->error());
    });
  }

  HttpResponse error() const {
    HttpResponse r;
    r.status = reader_.errorStatus();
    r.body = std::string(statusReason(r.status)) + "\n";
    return r;
  }

  HttpResponse answer() const {
    const auto& req = reader_.request();
    try {
      HttpResponse r = handler_(req);
      r.head_only = req.method == "HEAD";
      return r;
    } catch (const std::exception& e) {
      spdlog::warn("telemetry endpoint: handler failed on {}: {}", req.target, e.what());
      HttpResponse r;
      r.status = 500;
      r.body = "internal error\n";
      return r;
    }
  }

  // Always "Connection: close": one request per connection.
  void respond(const HttpResponse& r) {
    out_.result(unsigned(r.status));
    out_.set(http::field::content_type, r.content_type);
    out_.set(http::field::cache_control, "no-store");
    out_.set(http::field::connection, "close");
    if (r.status == 405) out_.set(http::field::allow, "GET, HEAD");
    out_.content_length(r.body.size());
    if (!r.head_only) out_.body() = r.body;
    auto self = shared_from_this();
    http::async_write(socket_, out_, [self](boost::system::error_code, size_t) {
      boost::system::error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
      self->finish();
    });
  }

  void finish() {
    reading_ = false;
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  const HttpServer::Handler& handler_;
  HttpRequestReader reader_;
  std::array<char, 2048> buf_{};
  http::response<http::string_body> out_;
  size_t& open_;
  bool reading_ = true;
};

}  // namespace

struct HttpServer::Impl {
  // Declared before io: sessions still pending when io is destroyed reference these.
  Handler handler;
  HttpServerOptions options;
  size_t open = 0;  // connections alive; touched only on the serving thread
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  tcp::endpoint bound;  // cached: the acceptor belongs to the serving thread once it runs
  std::thread thread;
  // Sessions in the order they were accepted, pruned of those that have ended or read their
  // request: the front is the connection that has waited longest without asking anything.
  std::deque<std::weak_ptr<Session>> waiting;
  std::atomic<uint64_t> idle_closed{0};
  std::atomic<uint64_t> refused{0};
  asio::steady_timer accept_pause{io};  // after a failed accept (e.g. no file descriptor left)

  // At the limit, the connection that has waited longest for its request head makes room: a
  // scraper sends its request as soon as it connects, so a client that holds connections open
  // without asking (or trickles its head) cannot lock the scrapers out for the request timeout.
  bool makeRoom() {
    while (!waiting.empty()) {
      auto oldest = waiting.front().lock();
      waiting.pop_front();
      if (oldest && oldest->evictIfReading()) {
        idle_closed.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  }

  void remember(const std::shared_ptr<Session>& session) {
    // Entries of sessions that ended or read their request are dropped when they reach the
    // front, or all at once when they outnumber the open connections: the list stays bounded.
    auto done = [](const std::weak_ptr<Session>& w) {
      auto s = w.lock();
      return !s || !s->reading();
    };
    while (!waiting.empty() && done(waiting.front())) waiting.pop_front();
    if (waiting.size() > 2 * options.max_connections)
      waiting.erase(std::remove_if(waiting.begin(), waiting.end(), done), waiting.end());
    waiting.push_back(session);
  }

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        // An evicted session leaves `open` when its read completes, after this handler: the
        // count can pass the limit by the evictions still pending, one per accepted connection.
        if (open >= options.max_connections && !makeRoom()) {
          // Every connection is answering a request: refuse rather than queue (a scraper
          // retries, and memory stays bounded).
          refused.fetch_add(1, std::memory_order_relaxed);
          boost::system::error_code ignored;
          socket.close(ignored);
        } else {
          auto session = std::make_shared<Session>(std::move(socket), handler, options, open);
          session->start();
          remember(session);
        }
      } else {
        // A failed accept (out of file descriptors: EMFILE) fails again at once while the cause
        // lasts: wait a little instead of spinning the serving thread. (Not logged: with no
        // descriptor left even a log line may fail.)
        accept_pause.expires_after(std::chrono::milliseconds(100));
        accept_pause.async_wait([this](boost::system::error_code wait_ec) {
          if (wait_ec != asio::error::operation_aborted) accept();
        });
        return;
      }
      accept();
    });
  }
};

HttpServer::HttpServer(const std::string& bind, Handler handler, HttpServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  impl_->options = options;
  BindAddress where = parseBindAddress(bind);
  tcp::resolver resolver(impl_->io);
  boost::system::error_code ec;
  auto results = resolver.resolve(where.host, std::to_string(where.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    throw std::runtime_error("HTTP address '" + bind + "': cannot resolve " + where.host + ": " +
                             ec.message());
  }
  tcp::endpoint endpoint = results.begin()->endpoint();
  auto& acc = impl_->acceptor;
  acc.open(endpoint.protocol());
  acc.set_option(tcp::acceptor::reuse_address(true));
  acc.bind(endpoint, ec);
  if (ec) {
    throw std::runtime_error("HTTP address '" + bind + "': cannot bind: " + ec.message());
  }
  acc.listen(asio::socket_base::max_listen_connections);
  impl_->bound = acc.local_endpoint();
  impl_->accept();
  impl_->thread = std::thread([this] {
    // One handler failure must not take the daemon down: log and keep serving.
    while (true) {
      try {
        impl_->io.run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("telemetry endpoint: {}", e.what());
      }
    }
  });
}

HttpServer::~HttpServer() {
  asio::post(impl_->io, [this] {
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->io.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t HttpServer::port() const { return impl_->bound.port(); }

uint64_t HttpServer::idleConnectionsClosed() const {
  return impl_->idle_closed.load(std::memory_order_relaxed);
}

uint64_t HttpServer::connectionsRefused() const {
  return impl_->refused.load(std::memory_order_relaxed);
}

std::string HttpServer::address() const {
  const auto& ep = impl_->bound;
  std::string host = ep.address().to_string();
  if (ep.address().is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(ep.port());
}

}  // namespace tern::telemetry
