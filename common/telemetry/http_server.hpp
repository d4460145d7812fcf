#pragma once
// The telemetry HTTP endpoint: a Boost.Asio server on its own thread (the one extra thread the
// architecture allows a daemon for HTTP). Boost.Beast reads requests (HttpRequestReader) and
// writes responses; the handler must only read state published for it (a snapshot under a
// mutex, atomic counters): the daemon's event loop and the protocol cores never run here.
// One request per connection, bounded head size, per-connection deadline, bounded connections;
// at the bound a new connection closes the one that has waited longest without a request.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/telemetry/http_request.hpp"
#include "common/util/bind_address.hpp"

namespace tern::telemetry {

struct HttpServerOptions {
  size_t max_connections = 32;
  double request_timeout_seconds = 5.0;  // slow or idle clients are dropped after this
  size_t max_head_bytes = 8192;
};

using tern::BindAddress;
using tern::parseBindAddress;

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds and listens now (so bind errors surface at start-up as exceptions) and starts the
  // serving thread. The handler is called on that thread.
  HttpServer(const std::string& bind, Handler handler, HttpServerOptions options = {});
  ~HttpServer();  // stops accepting, closes connections, joins the thread
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  // Connections closed to make room while still waiting for their request head, and
  // connections refused because every open one was answering a request. Any thread.
  uint64_t idleConnectionsClosed() const;
  uint64_t connectionsRefused() const;
  // "host:port" as bound, IPv6 hosts in brackets: what to put after "http://".
  std::string address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::telemetry
