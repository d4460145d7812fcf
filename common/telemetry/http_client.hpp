#pragma once
// A minimal HTTP/1.1 GET client over Boost.Beast for `tern-coordinator status` and for probing a
// daemon's telemetry endpoint: plain http only, one request per connection, an overall deadline
// and a cap on the response size, so a wedged or hostile endpoint cannot hang or exhaust it.
#include <cstdint>
#include <string>

#include "common/telemetry/http_request.hpp"

namespace tern::telemetry {

struct HttpUrl {
  std::string host;
  std::string port = "80";
  std::string target = "/";  // path and query
};
// Accepts http://HOST[:PORT][/PATH]; throws std::invalid_argument on anything else.
HttpUrl parseHttpUrl(const std::string& url);

// Throws std::runtime_error on connection failure, timeout, oversize or malformed responses.
// Non-2xx statuses are returned, not thrown.
HttpResponse httpGet(const std::string& url, double timeout_seconds = 5.0,
                     size_t max_response_bytes = 16u << 20);

}  // namespace tern::telemetry
