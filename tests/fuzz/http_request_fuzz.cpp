// libFuzzer target: the telemetry endpoint's request reader (Boost.Beast's parser plus the
// endpoint's policy) on arbitrary bytes, fed whole and in pieces as a socket would deliver them.
// Beyond "no crash, no UB": a request accepted one way is accepted the other way too (Beast may
// refuse a bad line before the head is complete, or only once it is), a refusal carries one of
// the documented statuses, and an accepted request is origin-form with its path a prefix of its
// target.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/telemetry/http_request.hpp"

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

using tern::telemetry::HttpRequestReader;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = 1 + data[0] % 64;  // the first byte sets the read size
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  HttpRequestReader whole(1024);
  HttpRequestReader pieces(1024);
  const auto state = whole.feed(bytes);
  auto piecewise = pieces.state();
  for (size_t at = 0; at < bytes.size(); at += piece)
    piecewise = pieces.feed(bytes.substr(at, piece));
  using State = HttpRequestReader::State;
  require((state == State::kComplete) == (piecewise == State::kComplete));
  for (const auto* reader : {&whole, &pieces}) {
    if (reader->state() != State::kBad) continue;
    const int s = reader->errorStatus();
    require(s == 400 || s == 413 || s == 431 || s == 501 || s == 505);
  }
  if (state == State::kComplete) {
    const auto& r = whole.request();
    require(!r.target.empty() && r.target.front() == '/');
    require(r.target.compare(0, r.path.size(), r.path) == 0);
    require(r.version.rfind("HTTP/1.", 0) == 0);
    require(r.target == pieces.request().target);
  }
  return 0;
}
