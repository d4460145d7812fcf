#include "common/telemetry/telemetry_service.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <limits>
#include <map>
#include <sstream>

#include "common/telemetry/json.hpp"

using namespace tern::telemetry;

namespace {

// Reads the exposition format into "name{k="v",...}" -> value, checking the line grammar:
// every sample's family has HELP and TYPE lines before it.
std::map<std::string, double> parseExposition(const std::string& text) {
  std::map<std::string, double> out;
  std::map<std::string, std::string> types;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      types[name] = type;
      continue;
    }
    REQUIRE(line[0] != '#');
    size_t space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    std::string series = line.substr(0, space);
    std::string name = series.substr(0, series.find('{'));
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string s = suffix;
      if (!types.count(family) && name.size() > s.size() &&
          name.compare(name.size() - s.size(), s.size(), s) == 0) {
        family = name.substr(0, name.size() - s.size());
      }
    }
    CAPTURE(line);
    REQUIRE(types.count(family));
    out[series] = std::stod(line.substr(space + 1));
  }
  return out;
}

NodeStatus sampleStatus() {
  NodeStatus s;
  s.role = "coordinator";
  s.name = "c";
  s.version = "0.1.0";
  s.state = "running";
  s.round = 4;
  s.rounds_completed = 5;
  s.time_s = 2.5;
  s.train_loss = 0.75;
  s.test_accuracy = 0.5;
  s.upload_bytes = 123456789012ull;
  s.download_bytes = 1000;
  s.full_bytes = 9007199254740991ull;  // 2^53 - 1: still exact in a double
  s.participants = 2;
  s.alive_workers = 2;
  s.late_pushes = 1;
  s.rejected = {{"bad_version", 3}, {"unknown_session", 1}};
  s.counters = {{"probe_bytes", {77, "Bytes of link calibration probes sent."}}};
  PeerStatus w;
  w.id = 7;
  w.name = "pi-7";
  w.alive = true;
  w.cap = 235;
  w.share = 0.25;
  w.level = 96;
  w.predicted_cost = 0.0115;
  w.predicted_improvement = 3.5e-4;
  w.upload_bytes = 600;
  w.download_bytes = 400;
  w.link = {0.002, 0.0015, 0.99, 12, 1448};
  s.workers.push_back(w);
  return s;
}

struct FakeClock {
  double now = 100.0;
};

}  // namespace

TEST_CASE("the published status becomes metrics with the same values") {
  FakeClock clock;
  TelemetryService t([&] { return clock.now; });
  t.publish(sampleStatus());
  auto m = parseExposition(t.metricsText());
  CHECK(m.at("tern_round") == 4);
  CHECK(m.at("tern_rounds_total") == 5);
  CHECK(m.at("tern_train_loss") == 0.75);
  CHECK(m.at("tern_test_accuracy") == 0.5);
  CHECK(m.at("tern_upload_bytes_total") == 123456789012.0);
  CHECK(m.at("tern_full_bytes_total") == 9007199254740991.0);
  CHECK(m.at("tern_download_bytes_total") == 1000);
  CHECK(m.at("tern_late_pushes_total") == 1);
  CHECK(m.at("tern_rejected_messages_total{reason=\"bad_version\"}") == 3);
  CHECK(m.at("tern_rejected_messages_total{reason=\"unknown_session\"}") == 1);
  CHECK(m.at("tern_probe_bytes_total") == 77);
  CHECK(m.at("tern_worker_cap{id=\"7\",worker=\"pi-7\"}") == 235);
  CHECK(m.at("tern_worker_share{id=\"7\",worker=\"pi-7\"}") == 0.25);
  CHECK(m.at("tern_worker_level{id=\"7\",worker=\"pi-7\"}") == 96);
  CHECK(m.at("tern_worker_predicted_cost{id=\"7\",worker=\"pi-7\"}") == 0.0115);
  CHECK(m.at("tern_worker_predicted_improvement{id=\"7\",worker=\"pi-7\"}") == 3.5e-4);
  CHECK(m.at("tern_worker_upload_bytes_total{id=\"7\",worker=\"pi-7\"}") == 600);
  CHECK(m.at("tern_worker_link_per_packet_seconds{id=\"7\",worker=\"pi-7\"}") == 0.0015);
  CHECK(m.at("tern_worker_link_samples{id=\"7\",worker=\"pi-7\"}") == 12);
  CHECK(m.at("tern_info{name=\"c\",role=\"coordinator\",version=\"0.1.0\"}") == 1);
}

TEST_CASE("counters follow growing totals and never move backwards") {
  TelemetryService t([] { return 0.0; });
  NodeStatus s = sampleStatus();
  t.publish(s);
  s.upload_bytes += 10;
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).at("tern_upload_bytes_total") == 123456789022.0);
  s.upload_bytes = 5;  // a source that restarted from zero
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).at("tern_upload_bytes_total") == 123456789022.0);
}

TEST_CASE("each completed round lands once in the round-duration histogram") {
  TelemetryService t([] { return 0.0; });
  NodeStatus s;
  s.rounds_completed = 1;
  s.time_s = 0.2;  // first round: 0.2 s
  t.publish(s);
  t.publish(s);  // republishing the same round observes nothing
  s.rounds_completed = 4;
  s.time_s = 6.2;  // three more rounds in 6 s: 2 s each
  t.publish(s);
  auto m = parseExposition(t.metricsText());
  CHECK(m.at("tern_round_duration_seconds_count") == 4);
  CHECK(m.at("tern_round_duration_seconds_sum") == doctest::Approx(6.2));
  CHECK(m.at("tern_round_duration_seconds_bucket{le=\"0.25\"}") == 1);
  CHECK(m.at("tern_round_duration_seconds_bucket{le=\"1\"}") == 1);
  CHECK(m.at("tern_round_duration_seconds_bucket{le=\"2.5\"}") == 4);
  CHECK(m.at("tern_round_duration_seconds_bucket{le=\"+Inf\"}") == 4);
}

TEST_CASE("/status serves the last published snapshot as a JSON document") {
  TelemetryService t([] { return 0.0; });
  HttpRequest req;
  req.method = "GET";
  req.path = "/status";
  CHECK(parseJson(t.handle(req).body).at("workers").empty());
  t.publish(sampleStatus());
  HttpResponse r = t.handle(req);
  CHECK(r.status == 200);
  CHECK(r.content_type == "application/json");
  Json v = parseJson(r.body);
  CHECK(jsonNumberOr(v, "rounds_completed", 0) == 5);
  CHECK(jsonNumberOr(v, "rejected_total", 0) == 4);
  CHECK(jsonNumberOr(v.at("rejected"), "bad_version", 0) == 3);
  const Json& w = v.at("workers").at(0);
  CHECK(jsonStringOr(w, "name", "") == "pi-7");
  CHECK(w.at("alive").get<bool>());
  CHECK(jsonNumberOr(w.at("link"), "a_seconds", 0) == 0.002);
  CHECK(jsonNumberOr(w, "level", 0) == 96);
  CHECK(jsonNumberOr(w, "predicted_cost", 0) == 0.0115);
  CHECK(jsonNumberOr(w, "predicted_improvement", 0) == 3.5e-4);
}

TEST_CASE("a node that evaluates nothing reports no accuracy rather than 0") {
  FakeClock clock;
  TelemetryService t([&] { return clock.now; });
  NodeStatus s = sampleStatus();
  s.role = "worker";
  s.test_accuracy.reset();
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).count("tern_test_accuracy") == 0);
  HttpRequest req;
  req.method = "GET";
  req.path = "/status";
  std::string body = t.handle(req).body;
  CHECK(body.find("\"test_accuracy\":null") != std::string::npos);
  CHECK(jsonFind(parseJson(body), "rounds_completed") != nullptr);
  s.test_accuracy = 0.0;  // an evaluation that scored 0 is still reported
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).at("tern_test_accuracy") == 0.0);
}

TEST_CASE("b's standard error leaves /metrics when the fit can no longer compute it") {
  FakeClock clock;
  TelemetryService t([&] { return clock.now; });
  NodeStatus s = sampleStatus();
  const std::string series = "tern_worker_link_per_packet_stderr_seconds{id=\"7\",worker=\"pi-7\"}";
  s.workers[0].link.b_stderr = 1.5e-5;
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).at(series) == 1.5e-5);
  s.workers[0].link.b_stderr = std::numeric_limits<double>::infinity();
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).count(series) == 0);
  CHECK(parseExposition(t.metricsText()).count("tern_worker_link_r2{id=\"7\",worker=\"pi-7\"}") ==
        1);
}

TEST_CASE("/healthz turns 503 when the event loop stops beating") {
  FakeClock clock;
  TelemetryService t([&] { return clock.now; }, 30.0);
  HttpRequest req;
  req.method = "GET";
  req.path = "/healthz";
  CHECK(t.handle(req).status == 200);
  clock.now += 31;
  CHECK(t.handle(req).status == 503);
  t.heartbeat();
  CHECK(t.handle(req).status == 200);
}

TEST_CASE("/healthz says degraded, with the reason, until the daemon clears it") {
  FakeClock clock;
  TelemetryService t([&] { return clock.now; }, 30.0);
  HttpRequest req;
  req.method = "GET";
  req.path = "/healthz";
  t.setDegraded("checkpoint not written: disk full");
  const HttpResponse degraded = t.handle(req);
  CHECK(degraded.status == 503);
  CHECK(degraded.body == "degraded: checkpoint not written: disk full\n");
  // A stalled loop is the graver news.
  clock.now += 31;
  CHECK(t.handle(req).body == "event loop stalled\n");
  t.heartbeat();
  t.setDegraded("");
  CHECK(t.handle(req).status == 200);
  CHECK(t.handle(req).body == "ok\n");
}

TEST_CASE("unknown paths are 404 and other methods 405") {
  TelemetryService t([] { return 0.0; });
  HttpRequest req;
  req.method = "GET";
  req.path = "/nope";
  CHECK(t.handle(req).status == 404);
  req.method = "POST";
  req.path = "/metrics";
  CHECK(t.handle(req).status == 405);
  req.method = "HEAD";
  CHECK(t.handle(req).status == 200);
}

TEST_CASE("a first snapshot of a resumed run sets the baseline without inventing durations") {
  TelemetryService t([] { return 0.0; });
  NodeStatus s;
  s.rounds_completed = 50;
  s.time_s = 3.0;
  t.publish(s);
  s.rounds_completed = 51;
  s.time_s = 3.5;
  t.publish(s);
  auto m = parseExposition(t.metricsText());
  CHECK(m.at("tern_round_duration_seconds_count") == 1);
  CHECK(m.at("tern_round_duration_seconds_sum") == doctest::Approx(0.5));
}

TEST_CASE("a worker that re-joins under another id or is no longer listed loses its old series") {
  TelemetryService t([] { return 0.0; });
  NodeStatus s = sampleStatus();
  REQUIRE(s.workers.size() == 1);
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).count("tern_worker_alive{id=\"7\",worker=\"pi-7\"}") == 1);
  // Re-joined a coordinator that gave it id 3: only the id-3 series remain, and the per-worker
  // upload counters add up to what the worker sent under its current id.
  s.workers[0].id = 3;
  s.workers[0].upload_bytes = 900;
  t.publish(s);
  auto m = parseExposition(t.metricsText());
  CHECK(m.count("tern_worker_alive{id=\"7\",worker=\"pi-7\"}") == 0);
  CHECK(m.count("tern_worker_upload_bytes_total{id=\"7\",worker=\"pi-7\"}") == 0);
  CHECK(m.at("tern_worker_upload_bytes_total{id=\"3\",worker=\"pi-7\"}") == 900);
  for (const auto& [key, value] : m) CHECK(key.find("id=\"7\"") == std::string::npos);
  // Back to id 7: its counter starts from the total again, not from the removed series.
  s.workers[0].id = 7;
  t.publish(s);
  m = parseExposition(t.metricsText());
  CHECK(m.at("tern_worker_upload_bytes_total{id=\"7\",worker=\"pi-7\"}") == 900);
  // No workers listed: no per-worker series at all.
  s.workers.clear();
  t.publish(s);
  for (const auto& [key, value] : parseExposition(t.metricsText()))
    CHECK(key.rfind("tern_worker_", 0) == std::string::npos);
}

namespace {

// "# HELP NAME TEXT" of the exposition text, by family name.
std::map<std::string, std::string> helpTexts(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) != 0) continue;
    size_t space = line.find(' ', 7);
    out[line.substr(7, space - 7)] = line.substr(space + 1);
  }
  return out;
}

double unixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST_CASE("a further counter carries the help text its producer gave it") {
  TelemetryService t([] { return 0.0; });
  t.publish(sampleStatus());
  auto help = helpTexts(t.metricsText());
  CHECK(help.at("tern_probe_bytes_total") == "Bytes of link calibration probes sent.");
  for (const auto& [name, text] : help) {
    CAPTURE(name);
    CHECK(text.size() > 10);
  }
}

TEST_CASE("the round deadline is exported only where it is known") {
  TelemetryService t([] { return 0.0; });
  NodeStatus s = sampleStatus();
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).count("tern_round_deadline_seconds") == 0);
  s.round_deadline_seconds = 2.5;
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).at("tern_round_deadline_seconds") == 2.5);
}

TEST_CASE("a completed round stamps the wall time, a resumed run's baseline does not") {
  TelemetryService t([] { return 0.0; });
  NodeStatus s;
  s.rounds_completed = 50;  // resumed: nothing completed in this process yet
  t.publish(s);
  const std::string stamp = "tern_last_round_completed_timestamp_seconds";
  CHECK(parseExposition(t.metricsText()).count(stamp) == 0);
  double before = unixNow();
  s.rounds_completed = 51;
  t.publish(s);
  double after = unixNow();
  double at = parseExposition(t.metricsText()).at(stamp);
  CHECK(at >= before);
  CHECK(at <= after);
}

TEST_CASE("/metrics carries this process's own process_* metrics") {
  TelemetryService t([] { return 0.0; });
  auto m = parseExposition(t.metricsText());
  CHECK(m.at("process_resident_memory_bytes") > 0);
  CHECK(m.at("process_virtual_memory_bytes") >= m.at("process_resident_memory_bytes"));
  CHECK(m.at("process_open_fds") >= 3);  // stdin, stdout, stderr at least
  CHECK(m.at("process_max_fds") >= m.at("process_open_fds"));
  CHECK(m.at("process_cpu_seconds_total") >= 0);
  CHECK(m.at("process_start_time_seconds") <= unixNow());
  CHECK(m.at("process_start_time_seconds") > unixNow() - 24 * 3600.0);
}

TEST_CASE("a worker's trainer connection is a gauge, a coordinator has none") {
  TelemetryService t([] { return 0.0; });
  NodeStatus s = sampleStatus();
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).count("tern_trainer_connected") == 0);
  s.role = "worker";
  s.trainer = TrainerStatus{"external", true, "numpy", 0, ""};
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).at("tern_trainer_connected") == 1);
  s.trainer->connected = false;
  t.publish(s);
  CHECK(parseExposition(t.metricsText()).at("tern_trainer_connected") == 0);
}
