#include "common/telemetry/http_client.hpp"

// clang-format off
// Boost 1.74's asio uses std::exchange without including <utility> (fixed in later releases).
#include <utility>
#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
// clang-format on

#include <algorithm>
#include <stdexcept>

namespace tern::telemetry {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
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

namespace {

// One GET on its own io_context; every step is asynchronous so that one deadline (run_for)
// bounds the whole exchange. The head is read first: Beast checks a declared Content-Length
// against the body limit only when the head is read on its own.
class GetExchange {
 public:
  GetExchange(const HttpUrl& u, size_t max_response_bytes)
      : request_{http::verb::get, u.target, 11} {
    const bool v6 = u.host.find(':') != std::string::npos;
    request_.set(http::field::host, (v6 ? "[" + u.host + "]" : u.host) + ":" + u.port);
    request_.set(http::field::accept, "*/*");
    request_.set(http::field::connection, "close");
    parser_.header_limit(uint32_t(std::min<size_t>(max_response_bytes, 64u << 10)));
    parser_.body_limit(max_response_bytes);
    resolver_.async_resolve(u.host, u.port, [this](error_code ec, auto results) {
      if (ec) return fail(ec);
      asio::async_connect(socket_, results, [this](error_code ec2, const tcp::endpoint&) {
        if (ec2) return fail(ec2);
        http::async_write(socket_, request_, [this](error_code ec3, size_t) {
          if (ec3) return fail(ec3);
          readHead();
        });
      });
    });
  }

  // Runs until the response is complete, an error, or the deadline; throws unless complete.
  HttpResponse run(const std::string& url, double timeout_seconds) {
    io_.run_for(std::chrono::milliseconds(int64_t(timeout_seconds * 1000)));
    if (!done_ && !failure_) {
      throw std::runtime_error(url + ": no complete response within " +
                               std::to_string(timeout_seconds) + " s");
    }
    if (failure_) throw std::runtime_error(url + ": " + failure_.message());
    HttpResponse r;
    auto& message = parser_.get();
    r.status = int(message.result_int());
    if (auto type = message.find(http::field::content_type); type != message.end())
      r.content_type = std::string(type->value());
    r.body = std::move(message.body());
    return r;
  }

 private:
  using error_code = boost::system::error_code;
  void fail(error_code ec) { failure_ = ec; }
  void readHead() {
    http::async_read_header(socket_, buffer_, parser_, [this](error_code ec, size_t) {
      if (ec) return fail(ec);
      http::async_read(socket_, buffer_, parser_, [this](error_code ec2, size_t) {
        if (ec2) return fail(ec2);
        done_ = true;
      });
    });
  }

  asio::io_context io_;
  tcp::resolver resolver_{io_};
  tcp::socket socket_{io_};
  http::request<http::empty_body> request_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  error_code failure_;
  bool done_ = false;
};

}  // namespace

HttpResponse httpGet(const std::string& url, double timeout_seconds, size_t max_response_bytes) {
  GetExchange exchange(parseHttpUrl(url), max_response_bytes);
  return exchange.run(url, timeout_seconds);
}

}  // namespace tern::telemetry
