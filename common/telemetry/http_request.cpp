#include "common/telemetry/http_request.hpp"

// clang-format off
// Boost 1.74's asio uses std::exchange without including <utility> (fixed in later releases).
#include <utility>
#include <boost/beast/http.hpp>
// clang-format on

#include <algorithm>
#include <cctype>

namespace tern::telemetry {

namespace http = boost::beast::http;

std::string_view statusReason(int status) {
  auto reason = http::obsolete_reason(http::int_to_status(unsigned(status)));
  return {reason.data(), reason.size()};
}

struct HttpRequestReader::Parser {
  http::request_parser<http::empty_body> beast;
};

HttpRequestReader::HttpRequestReader(size_t max_head_bytes)
    : max_head_(max_head_bytes), parser_(std::make_unique<Parser>()) {
  // The head's size is judged here, on the bytes it really spans, the same however they arrive:
  // Beast's own limit counts what it was handed at once, so it only bounds the scan.
  const size_t scan = std::min<size_t>(2 * max_head_ + 1024, UINT32_MAX);
  parser_->beast.header_limit(static_cast<std::uint32_t>(scan));
  parser_->beast.body_limit(0);  // a request with a body is refused (413), never read
}

HttpRequestReader::~HttpRequestReader() = default;

HttpRequestReader::State HttpRequestReader::bad(int status) {
  error_status_ = status;
  state_ = State::kBad;
  return state_;
}

namespace {

// A well-formed version of another major release ("HTTP/2.0") on the request line: 505, not 400.
bool otherMajorVersion(std::string_view head) {
  std::string_view line = head.substr(0, head.find("\r\n"));
  std::string_view v = line.substr(line.rfind(' ') + 1);
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  return v.size() == 8 && v.substr(0, 5) == "HTTP/" && digit(v[5]) && v[6] == '.' && digit(v[7]) &&
         v[5] != '1';
}

// A line ended by LF alone (RFC 9112 2.2 lets a server refuse it): Beast waits for a CRLF that
// never comes, so such a head would otherwise go unanswered until the connection's deadline.
bool bareLineFeed(std::string_view parsed, std::string_view rest) {
  for (size_t i = rest.find('\n'); i != std::string_view::npos; i = rest.find('\n', i + 1)) {
    const char before = i > 0 ? rest[i - 1] : parsed.empty() ? '\0' : parsed.back();
    if (before != '\r') return true;
  }
  return false;
}

}  // namespace

HttpRequestReader::State HttpRequestReader::feed(std::string_view bytes) {
  if (state_ != State::kIncomplete) return state_;
  buf_.append(bytes);
  if (head_.empty()) {
    // Robustness (RFC 9112 2.2): empty lines before the request line are ignored.
    size_t lead = 0;
    while (lead + 1 < buf_.size() && buf_[lead] == '\r' && buf_[lead + 1] == '\n') lead += 2;
    if (lead) buf_.erase(0, lead);
    if (buf_.empty() || buf_ == "\r") return state_;
  }
  boost::beast::error_code ec;
  // Beast consumes the lines it has parsed, even while it needs more: they move to head_.
  size_t used = parser_->beast.put(boost::asio::buffer(buf_.data(), buf_.size()), ec);
  head_.append(buf_, 0, used);
  buf_.erase(0, used);
  if (ec == http::error::need_more) {
    if (bareLineFeed(head_, buf_)) return bad(400);
    return head_.size() + buf_.size() > max_head_ ? bad(431) : state_;
  }
  if (ec == http::error::header_limit) return bad(431);
  if (ec == http::error::body_limit) return bad(413);
  if (ec == http::error::bad_version && head_.empty() && otherMajorVersion(buf_)) return bad(505);
  if (ec) return bad(400);
  if (head_.size() > max_head_) return bad(431);
  // Beast unfolds obsolete line folding; the endpoint refuses it instead (RFC 9112 5.2).
  if (head_.find("\r\n ") != std::string::npos || head_.find("\r\n\t") != std::string::npos) {
    return bad(400);
  }
  return accept();
}

HttpRequestReader::State HttpRequestReader::accept() {
  const auto& r = parser_->beast.get();
  const std::string_view target(r.target().data(), r.target().size());
  // Origin-form only: this endpoint is never a proxy.
  if (target.empty() || target.front() != '/') return bad(400);
  if (r.version() / 10 != 1) return bad(505);
  if (r.version() == 11 && r.find(http::field::host) == r.end()) return bad(400);
  // A request body would have to be read and framed; none of our routes accepts one.
  if (r.find(http::field::transfer_encoding) != r.end()) return bad(501);
  req_.method = std::string(r.method_string());
  req_.target = std::string(target);
  req_.path = std::string(target.substr(0, target.find('?')));
  req_.version =
      "HTTP/" + std::to_string(r.version() / 10) + "." + std::to_string(r.version() % 10);
  for (const auto& field : r) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    auto [it, inserted] = req_.headers.emplace(name, std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  state_ = State::kComplete;
  return state_;
}

}  // namespace tern::telemetry
