#pragma once
// HTTP/1.x requests of the daemons' telemetry endpoint, without sockets: Boost.Beast parses the
// request head as its bytes arrive, and the endpoint's policy is applied on top. The endpoint
// only answers GET/HEAD of a few paths, so requests carry no body; anything else (bodies,
// oversized heads, bad syntax, proxy-form targets) is refused with a status code.
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace tern::telemetry {

struct HttpRequest {
  std::string method;
  std::string target;                          // as sent, e.g. "/metrics?x=1"
  std::string path;                            // target without the query
  std::string version;                         // "HTTP/1.1"
  std::map<std::string, std::string> headers;  // names lower-cased, repeats joined with ", "
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  bool head_only = false;  // HEAD: Content-Length of the body, no body bytes
};

// The standard reason phrase of a status code.
std::string_view statusReason(int status);

class HttpRequestReader {
 public:
  enum class State { kIncomplete, kComplete, kBad };
  explicit HttpRequestReader(size_t max_head_bytes = 8192);
  ~HttpRequestReader();
  HttpRequestReader(const HttpRequestReader&) = delete;
  HttpRequestReader& operator=(const HttpRequestReader&) = delete;

  // Feeds bytes; once kComplete or kBad the result is final and further input is ignored.
  State feed(std::string_view bytes);
  State state() const { return state_; }
  const HttpRequest& request() const { return req_; }
  // The status to answer with when kBad (400, 413, 431, 501, 505).
  int errorStatus() const { return error_status_; }

 private:
  struct Parser;
  State bad(int status);
  State accept();

  size_t max_head_;
  std::string head_;  // bytes of the head the parser has consumed
  std::string buf_;   // bytes not consumed yet
  std::unique_ptr<Parser> parser_;
  State state_ = State::kIncomplete;
  HttpRequest req_;
  int error_status_ = 400;
};

}  // namespace tern::telemetry
