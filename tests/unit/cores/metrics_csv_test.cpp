// The coordinator's metrics CSV across a restart: the rows of rounds before the checkpoint stay,
// the rows of rounds the resumed run redoes are dropped, and a file of another format is kept
// aside rather than mixed with new rows.
#include "server/metrics_csv.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "scratch_dir.hpp"

using namespace tern;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

server::RoundRecord record(uint64_t round) {
  server::RoundRecord r;
  r.round = round;
  r.participants = 1;
  return r;
}

std::string scratch(const std::string& name) {
  // One directory for the whole process, removed at exit.
  static const tern::testing::ScratchDir scratch_dir("metrics-csv-test");
  const std::filesystem::path dir = scratch_dir.dir;
  const auto path = (dir / name).string();
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".old");
  return path;
}

}  // namespace

TEST_CASE("a resumed coordinator continues its metrics CSV without the rounds it redoes") {
  const std::string path = scratch("resume.csv");
  {
    server::MetricsCsv csv(path);
    for (uint64_t r = 0; r < 5; ++r) csv.write(record(r));
  }
  // A crash mid-write leaves a torn last line.
  std::ofstream(path, std::ios::app) << "5,0.1";
  {
    server::MetricsCsv csv(path, 3);  // the checkpoint was at the start of round 3
    for (uint64_t r = 3; r < 6; ++r) csv.write(record(r));
  }
  std::string expected = server::MetricsCsv::header() + "\n";
  for (uint64_t r = 0; r < 6; ++r) expected += server::MetricsCsv::row(record(r)) + "\n";
  CHECK(slurp(path) == expected);
  CHECK_FALSE(std::filesystem::exists(path + ".old"));
}

TEST_CASE(
    "a resumed coordinator starts afresh a metrics CSV that is missing or of another format") {
  const std::string missing = scratch("missing.csv");
  { server::MetricsCsv csv(missing, 7); }
  CHECK(slurp(missing) == server::MetricsCsv::header() + "\n");

  const std::string old_format = scratch("old_format.csv");
  std::ofstream(old_format) << "round,time_s\n0,0.5\n";
  {
    server::MetricsCsv csv(old_format, 1);
    csv.write(record(1));
  }
  CHECK(slurp(old_format) ==
        server::MetricsCsv::header() + "\n" + server::MetricsCsv::row(record(1)) + "\n");
  CHECK(slurp(old_format + ".old") == "round,time_s\n0,0.5\n");
}

TEST_CASE("a run that does not resume keeps an earlier run's metrics CSV as PATH.old") {
  const std::string path = scratch("fresh.csv");
  CHECK_FALSE(server::MetricsCsv::keepPrevious(path));  // nothing there
  std::ofstream(path) << "round,time_s\n0,0.5\n";
  CHECK(server::MetricsCsv::keepPrevious(path));
  {
    server::MetricsCsv csv(path);
    CHECK(csv.write(record(0)));
  }
  CHECK(slurp(path + ".old") == "round,time_s\n0,0.5\n");
  CHECK(slurp(path) ==
        server::MetricsCsv::header() + "\n" + server::MetricsCsv::row(record(0)) + "\n");
  std::ofstream(path, std::ios::trunc).close();
  CHECK_FALSE(server::MetricsCsv::keepPrevious(path));  // an empty file holds no record
}

TEST_CASE("a metrics row that cannot be written is reported, and the next row tries again") {
  REQUIRE_MESSAGE(std::filesystem::exists("/dev/full"), "no /dev/full to fail the writes");
  server::MetricsCsv csv("/dev/full");
  CHECK_FALSE(csv.write(record(0)));
  CHECK_FALSE(csv.write(record(1)));
}

TEST_CASE("each row names the workers its per-worker columns belong to") {
  // Worker 1 was forgotten: the row holds workers 0 and 2, and without their ids worker 2's
  // values read as worker 1's.
  server::RoundRecord r = record(7);
  for (uint32_t id : {0u, 2u}) {
    server::WorkerRecord w;
    w.id = id;
    w.alive = true;
    w.cap = 100 + id;
    w.level = 10 + id;
    r.workers.push_back(w);
  }
  const std::string header = server::MetricsCsv::header();
  const std::string row = server::MetricsCsv::row(r);
  auto fields = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream in(line);
    for (std::string f; std::getline(in, f, ',');) out.push_back(f);
    return out;
  };
  const auto names = fields(header), values = fields(row);
  REQUIRE(names.size() == values.size());
  std::map<std::string, std::string> at;
  for (size_t i = 0; i < names.size(); ++i) at[names[i]] = values[i];
  CHECK(at["worker_ids"] == "0;2");
  CHECK(at["caps"] == "100;102");
  CHECK(at["levels"] == "10;12");
}

TEST_CASE("the final line says none for an accuracy that was never measured") {
  CHECK(server::finalLine(3, std::nullopt, 10, 20) ==
        "final: rounds=3 test_accuracy=none upload_bytes=10 full_bytes=20");
  CHECK(server::finalLine(600, 0.81234, 4990000, 75360000) ==
        "final: rounds=600 test_accuracy=0.8123 upload_bytes=4990000 full_bytes=75360000");
}

TEST_CASE("a round's progress line says acc=- until an evaluation has measured it") {
  server::RoundRecord r;
  r.round = 3;
  CHECK(server::progressLine(r).find(" acc=- ") != std::string::npos);
  r.test_accuracy = 0.5;
  r.accuracy_measured = true;
  CHECK(server::progressLine(r).find(" acc=0.5000 ") != std::string::npos);
}
