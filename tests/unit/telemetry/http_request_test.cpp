#include "common/telemetry/http_request.hpp"

#include <doctest/doctest.h>

#include "common/telemetry/http_client.hpp"
#include "common/telemetry/http_server.hpp"

using namespace tern::telemetry;
using State = HttpRequestReader::State;

TEST_CASE("a GET request parses whole, one byte at a time, and split anywhere") {
  const std::string raw =
      "GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUser-Agent: t\r\nAccept:  */* \r\n\r\n";
  auto check = [](const HttpRequest& r) {
    CHECK(r.method == "GET");
    CHECK(r.target == "/metrics?x=1");
    CHECK(r.path == "/metrics");
    CHECK(r.version == "HTTP/1.1");
    CHECK(r.headers.at("host") == "127.0.0.1:9");
    CHECK(r.headers.at("user-agent") == "t");
    CHECK(r.headers.at("accept") == "*/*");
  };
  HttpRequestReader whole;
  REQUIRE(whole.feed(raw) == State::kComplete);
  check(whole.request());
  HttpRequestReader bytes;
  for (size_t i = 0; i + 1 < raw.size(); ++i) {
    REQUIRE(bytes.feed(raw.substr(i, 1)) == State::kIncomplete);
  }
  REQUIRE(bytes.feed(raw.substr(raw.size() - 1)) == State::kComplete);
  check(bytes.request());
  for (size_t split = 1; split < raw.size(); ++split) {
    CAPTURE(split);
    HttpRequestReader two;
    REQUIRE(two.feed(raw.substr(0, split)) == State::kIncomplete);
    REQUIRE(two.feed(raw.substr(split)) == State::kComplete);
    check(two.request());
  }
}

TEST_CASE("HTTP/1.0 needs no Host header and leading empty lines are skipped") {
  HttpRequestReader p;
  CHECK(p.feed("\r\n\r\nHEAD / HTTP/1.0\r\n\r\n") == State::kComplete);
  CHECK(p.request().method == "HEAD");
}

TEST_CASE("malformed or unsupported requests are refused with the matching status") {
  struct Case {
    const char* raw;
    int status;
  } cases[] = {
      {"GET /\r\nHost: a\r\n\r\n", 400},                   // no version
      {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},         // double space
      {"GET / HTTP/1.1\r\n\r\n", 400},                     // 1.1 without Host
      {"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400},  // proxy form
      {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
      {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},            // space before colon
      {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400},  // obsolete folding
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", 413},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
      {"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999\r\n\r\n", 413},
      {"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n", 400},  // control character
      {"GET / HTTP/1.1\nHost: a\n\n", 400},                   // bare LF line endings
      {"GET / HTTP/1.1\r\nHost: a\r\n\n", 400},      // a head ended by a bare LF (Beast waits)
      {"GET / HTTP/1.0\r\n\n", 400},                 // the same without headers
      {"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400},  // a bare LF before the request
  };
  for (const auto& c : cases) {
    CAPTURE(c.raw);
    HttpRequestReader p;
    CHECK(p.feed(c.raw) == State::kBad);
    CHECK(p.errorStatus() == c.status);
  }
}

TEST_CASE("a head larger than the limit is refused before its end arrives") {
  HttpRequestReader p(64);
  std::string line = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a');
  CHECK(p.feed(line) == State::kBad);
  CHECK(p.errorStatus() == 431);
  CHECK(p.feed("\r\n\r\n") == State::kBad);  // final
}

TEST_CASE("URLs and bind addresses split into host, port and path") {
  auto u = parseHttpUrl("http://127.0.0.1:9100/status?x");
  CHECK(u.host == "127.0.0.1");
  CHECK(u.port == "9100");
  CHECK(u.target == "/status?x");
  auto v6 = parseHttpUrl("http://[::1]:80");
  CHECK(v6.host == "::1");
  CHECK(v6.target == "/");
  CHECK(parseHttpUrl("http://host").port == "80");
  CHECK_THROWS(parseHttpUrl("https://host/"));
  CHECK_THROWS(parseHttpUrl("http://host:99999/"));
  CHECK_THROWS(parseHttpUrl("http://user@host/"));
  CHECK_THROWS(parseHttpUrl("http://:80/"));

  auto b = parseBindAddress("127.0.0.1:0");
  CHECK(b.host == "127.0.0.1");
  CHECK(b.port == 0);
  CHECK(parseBindAddress("[::1]:9").host == "::1");
  CHECK(parseBindAddress(":9464").host == "0.0.0.0");
  CHECK(parseBindAddress(":9464").port == 9464);
  CHECK_THROWS(parseBindAddress("127.0.0.1"));
  CHECK_THROWS(parseBindAddress("::1:80"));
  CHECK_THROWS(parseBindAddress("h:65536"));
  CHECK_THROWS(parseBindAddress("h:"));
}

TEST_CASE("the head limit counts the head's bytes, the same whole or in pieces of any size") {
  // A head of exactly `limit` bytes passes, one byte more is refused: fed at once, and in every
  // piece size from 1 to 70 (the pieces put the end of the head on every side of the limit).
  const std::string start = "GET / HTTP/1.1\r\nHost: a\r\nX: ";
  const size_t limit = 100;
  for (const size_t size : {limit, limit + 1}) {
    const std::string head = start + std::string(size - start.size() - 4, 'a') + "\r\n\r\n";
    REQUIRE(head.size() == size);
    const State want = size <= limit ? State::kComplete : State::kBad;
    HttpRequestReader whole(limit);
    CHECK(whole.feed(head) == want);
    for (size_t piece = 1; piece <= 70; ++piece) {
      CAPTURE(size);
      CAPTURE(piece);
      HttpRequestReader pieces(limit);
      State got = pieces.state();
      for (size_t at = 0; at < head.size(); at += piece) got = pieces.feed(head.substr(at, piece));
      CHECK(got == want);
      if (want == State::kBad) CHECK(pieces.errorStatus() == 431);
    }
  }
}
