#include "common/telemetry/http_client.hpp"

// clang-format off
// Boost 1.74's asio uses std::exchange without including <utility> (fixed in later releases).
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include <array>
#include <functional>
#include <stdexcept>

namespace tern::telemetry {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

HttpUrl parseHttpUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    throw std::invalid_argument("URL '" + url + "': only http:// is supported");
  }
  std::string rest = url.substr(scheme.size());
  HttpUrl out;
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out.target = rest.substr(slash);
  if (authority.find('@') != std::string::npos) {
    throw std::invalid_argument("URL '" + url + "': credentials in URLs are not supported");
  }
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string::npos) throw std::invalid_argument("URL '" + url + "': unclosed '['");
    out.host = authority.substr(1, close - 1);
    std::string tail = authority.substr(close + 1);
    if (!tail.empty()) {
      if (tail.front() != ':') throw std::invalid_argument("URL '" + url + "': bad port");
      out.port = tail.substr(1);
    }
  } else {
    size_t colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) out.port = authority.substr(colon + 1);
  }
  if (out.host.empty()) throw std::invalid_argument("URL '" + url + "': no host");
  if (out.port.empty() || out.port.size() > 5 ||
      out.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(out.port) > 65535) {
    throw std::invalid_argument("URL '" + url + "': bad port");
  }
  return out;
}

HttpResponse httpGet(const std::string& url, double timeout_seconds, size_t max_response_bytes) {
  HttpUrl u = parseHttpUrl(url);
  asio::io_context io;
  tcp::resolver resolver(io);
  tcp::socket socket(io);
  std::string request = "GET " + u.target + " HTTP/1.1\r\nHost: " +
                        (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) +
                        ":" + u.port + "\r\nAccept: */*\r\nConnection: close\r\n\r\n";
  std::string raw;
  std::array<char, 4096> buf{};
  boost::system::error_code failure;
  bool done = false;

  // Every step is asynchronous so that one deadline (run_for) bounds the whole exchange.
  std::function<void()> readMore = [&] {
    socket.async_read_some(asio::buffer(buf), [&](boost::system::error_code ec, size_t n) {
      raw.append(buf.data(), n);
      if (raw.size() > max_response_bytes) {
        failure = asio::error::message_size;
        return;
      }
      if (ec == asio::error::eof) {
        done = true;
      } else if (ec) {
        failure = ec;
      } else {
        readMore();
      }
    });
  };
  resolver.async_resolve(u.host, u.port, [&](boost::system::error_code ec, auto results) {
    if (ec) {
      failure = ec;
      return;
    }
    asio::async_connect(socket, results, [&](boost::system::error_code ec, const tcp::endpoint&) {
      if (ec) {
        failure = ec;
        return;
      }
      asio::async_write(socket, asio::buffer(request), [&](boost::system::error_code ec, size_t) {
        if (ec) {
          failure = ec;
          return;
        }
        readMore();
      });
    });
  });
  io.run_for(std::chrono::milliseconds(int64_t(timeout_seconds * 1000)));
  if (!done && !failure) {
    throw std::runtime_error(url + ": no complete response within " +
                             std::to_string(timeout_seconds) + " s");
  }
  if (failure) throw std::runtime_error(url + ": " + failure.message());
  return parseHttpResponse(raw);
}

}  // namespace tern::telemetry
