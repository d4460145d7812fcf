#pragma once
// HTTP/1.x messages for the daemons' telemetry endpoint, without sockets: a request parser fed
// bytes as they arrive and a response serializer. The endpoint only answers GET/HEAD of a few
// paths, so requests carry no body; anything else (bodies, oversized heads, bad syntax) is
// refused with a status code instead of being trusted.
#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace tern::telemetry {

struct HttpRequest {
  std::string method;
  std::string target;                          // as sent, e.g. "/metrics?x=1"
  std::string path;                            // target without the query
  std::string version;                         // "HTTP/1.1"
  std::map<std::string, std::string> headers;  // names lower-cased
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  bool head_only = false;  // HEAD: Content-Length of the body, no body bytes
};

std::string_view statusReason(int status);
// Status line, headers and body; always "Connection: close" (one request per connection).
std::string serializeResponse(const HttpResponse& r);

// Parses a complete response as read until the server closed the connection (our endpoint
// always closes). Honors Content-Length when present; throws std::runtime_error on bad syntax.
HttpResponse parseHttpResponse(std::string_view raw);

class HttpRequestParser {
 public:
  enum class State { kIncomplete, kComplete, kBad };
  explicit HttpRequestParser(size_t max_head_bytes = 8192) : max_head_(max_head_bytes) {}

  // Feeds bytes; once kComplete or kBad the result is final and further input is ignored.
  State feed(std::string_view bytes);
  State state() const { return state_; }
  const HttpRequest& request() const { return req_; }
  // The status to answer with when kBad (400, 413, 501, 505).
  int errorStatus() const { return error_status_; }

 private:
  State parseHead();
  State bad(int status);

  size_t max_head_;
  std::string buf_;
  State state_ = State::kIncomplete;
  HttpRequest req_;
  int error_status_ = 400;
};

}  // namespace tern::telemetry
