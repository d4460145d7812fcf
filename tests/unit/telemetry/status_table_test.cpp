#include "common/telemetry/status_table.hpp"

#include <doctest/doctest.h>

#include "common/telemetry/json.hpp"
#include "common/telemetry/node_status.hpp"

using namespace tern::telemetry;

namespace {
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("the table shows the round, accuracy, bytes and one row per worker") {
  NodeStatus s;
  s.role = "coordinator";
  s.name = "coord";
  s.version = "0.1.0";
  s.state = "running";
  s.round = 41;
  s.rounds_completed = 42;
  s.test_accuracy = 0.8123;
  s.upload_bytes = 2500000;
  s.full_bytes = 100000000;
  s.rejected = {{"stale_round", 2}};
  for (uint32_t i = 0; i < 2; ++i) {
    PeerStatus w;
    w.id = i;
    w.name = i ? "a-much-longer-worker-name" : "w0";
    w.alive = i == 0;
    w.cap = 100 + i;
    w.level = i ? 0 : 37;  // the second worker did not push in the last round
    w.share = 0.5;
    w.link = {0.0021, 0.00031, 0.95, i ? 0u : 9u, 1448};
    s.workers.push_back(w);
  }
  std::string t = renderStatusTable(parseJson(toJson(s)));
  CHECK(contains(t, "round 41 (42 completed)"));
  CHECK(contains(t, "test accuracy 0.8123"));
  CHECK(contains(t, "uploaded 2.50 MB (2.50% of uncompressed)"));
  CHECK(contains(t, "stale_round=2"));
  CHECK(contains(t, "a-much-longer-worker-name"));
  CHECK(contains(t, "2.1ms"));  // link a of the worker with samples
  CHECK(contains(t, "310us"));  // link b
  CHECK(contains(t, "last T"));
  CHECK(contains(t, "    100       37"));  // w0: cap 100, its last push sent T = 37
  CHECK(contains(t, "    101        -"));  // no push in the last round
  // One header and two worker rows, aligned: every table line has the same length.
  std::vector<std::string> rows;
  size_t start = t.find("\n\n") + 2;
  for (size_t end; (end = t.find('\n', start)) != std::string::npos; start = end + 1) {
    rows.push_back(t.substr(start, end - start));
  }
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].size() == rows[1].size());
  CHECK(rows[1].size() == rows[2].size());
}

TEST_CASE("a worker's table shows no test accuracy, since workers evaluate nothing") {
  NodeStatus s;
  s.role = "worker";
  s.train_loss = 0.61;
  std::string t = renderStatusTable(parseJson(toJson(s)));
  CHECK(contains(t, "train loss 0.6100   test accuracy -\n"));
  s.test_accuracy = 0.0;
  CHECK(contains(renderStatusTable(parseJson(toJson(s))), "test accuracy 0.0000\n"));
}

TEST_CASE("strings from the document cannot drive the terminal or make a row huge") {
  NodeStatus s;
  s.role = "coordinator";
  s.name = "coord\x1b]0;owned\x07";
  s.state = "running\r\nforged line";
  PeerStatus w;
  w.name = std::string(1000000, 'n') + "\x1b[2J";
  s.workers.push_back(w);
  PeerStatus v;
  v.name = "pi\n[error] FORGED";
  s.workers.push_back(v);
  const std::string t = renderStatusTable(parseJson(toJson(s)));
  for (char c : t) CHECK((c == '\n' || static_cast<unsigned char>(c) >= 0x20));
  CHECK(contains(t, "coord\\x1b]0;owned\\x07"));
  CHECK(contains(t, "running\\x0d\\x0aforged line"));
  CHECK(contains(t, "pi\\x0a[error] FORGED"));
  CHECK(t.size() < 2000);  // the long name cut to 64 characters, every row padded to that
}

TEST_CASE("a document with missing fields still renders, a non-object is refused") {
  CHECK(contains(renderStatusTable(parseJson("{}")), "no workers known yet"));
  CHECK_THROWS_AS(renderStatusTable(parseJson("[1]")), JsonError);
}

TEST_CASE("byte counts read in powers of 1000") {
  CHECK(humanBytes(999) == "999 B");
  CHECK(humanBytes(1000) == "1.00 kB");
  CHECK(humanBytes(5.0e6) == "5.00 MB");
  CHECK(humanBytes(7.5e9) == "7.50 GB");
}
