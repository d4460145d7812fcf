#include "common/telemetry/http_message.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <stdexcept>

namespace tern::telemetry {

std::string_view statusReason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string serializeResponse(const HttpResponse& r) {
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "Connection: close\r\n",
      r.status, statusReason(r.status), r.content_type, r.body.size());
  if (r.status == 405) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (!r.head_only) out += r.body;
  return out;
}

HttpResponse parseHttpResponse(std::string_view raw) {
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string_view::npos) throw std::runtime_error("HTTP response: no header end");
  std::string_view head = raw.substr(0, head_end + 2);
  std::string_view body = raw.substr(head_end + 4);
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  // status-line = HTTP-version SP status-code SP [reason-phrase]
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ' ||
      (line.size() > 12 && line[12] != ' ')) {
    throw std::runtime_error("HTTP response: bad status line");
  }
  HttpResponse r;
  r.status = 0;
  for (char c : line.substr(9, 3)) {
    if (c < '0' || c > '9') throw std::runtime_error("HTTP response: bad status code");
    r.status = r.status * 10 + (c - '0');
  }
  head.remove_prefix(eol + 2);
  std::optional<size_t> length;
  while (!head.empty()) {
    eol = head.find("\r\n");
    line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) throw std::runtime_error("HTTP response: bad header");
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (name == "content-type") r.content_type = std::string(value);
    if (name == "transfer-encoding") {
      throw std::runtime_error("HTTP response: transfer codings are not supported");
    }
    if (name == "content-length") {
      if (value.empty() || value.size() > 18 ||
          value.find_first_not_of("0123456789") != std::string_view::npos) {
        throw std::runtime_error("HTTP response: bad Content-Length");
      }
      length = std::stoull(std::string(value));
    }
  }
  if (length) {
    if (body.size() < *length)
      throw std::runtime_error("HTTP response: body shorter than declared");
    body = body.substr(0, *length);
  }
  r.body = std::string(body);
  return r;
}

namespace {

bool isTokenChar(char c) {
  // RFC 9110 tchar
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

HttpRequestParser::State HttpRequestParser::bad(int status) {
  error_status_ = status;
  state_ = State::kBad;
  return state_;
}

HttpRequestParser::State HttpRequestParser::feed(std::string_view bytes) {
  if (state_ != State::kIncomplete) return state_;
  buf_.append(bytes);
  // Robustness (RFC 9112 2.2): empty lines before the request line are ignored.
  size_t lead = 0;
  while (lead + 1 < buf_.size() && buf_[lead] == '\r' && buf_[lead + 1] == '\n') lead += 2;
  if (lead) buf_.erase(0, lead);
  size_t end = buf_.find("\r\n\r\n");
  if (end == std::string::npos) {
    if (buf_.size() > max_head_) return bad(431);
    return state_;
  }
  if (end + 4 > max_head_) return bad(431);
  buf_.resize(end + 2);  // keep the last header's CRLF; anything after the head is ignored
  return parseHead();
}

HttpRequestParser::State HttpRequestParser::parseHead() {
  std::string_view head = buf_;
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  head.remove_prefix(eol + 2);

  // request-line = method SP request-target SP HTTP-version
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return bad(400);
  size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return bad(400);
  if (line.find(' ', sp2 + 1) != std::string_view::npos) return bad(400);
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!std::all_of(method.begin(), method.end(), isTokenChar)) return bad(400);
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      !std::isdigit(static_cast<unsigned char>(version[5])) ||
      !std::isdigit(static_cast<unsigned char>(version[7]))) {
    return bad(400);
  }
  if (version[5] != '1') return bad(505);
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return bad(400);
  }
  // Origin-form only: this endpoint is never a proxy.
  if (target.empty() || target.front() != '/') return bad(400);

  req_.method = std::string(method);
  req_.target = std::string(target);
  req_.path = std::string(target.substr(0, target.find('?')));
  req_.version = std::string(version);

  while (!head.empty()) {
    eol = head.find("\r\n");
    line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return bad(400);
    std::string_view name = line.substr(0, colon);
    // No whitespace between name and colon (RFC 9112 5.1), no obsolete line folding.
    if (!std::all_of(name.begin(), name.end(), isTokenChar)) return bad(400);
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    std::string_view value = trim(line.substr(colon + 1));
    auto [it, inserted] = req_.headers.emplace(lower, std::string(value));
    if (!inserted) it->second += ", " + std::string(value);
  }

  if (req_.version == "HTTP/1.1" && !req_.headers.count("host")) return bad(400);
  // A request body would have to be read and framed; none of our routes accepts one.
  if (req_.headers.count("transfer-encoding")) return bad(501);
  if (auto it = req_.headers.find("content-length"); it != req_.headers.end()) {
    if (it->second != "0") return bad(413);
  }
  state_ = State::kComplete;
  return state_;
}

}  // namespace tern::telemetry
