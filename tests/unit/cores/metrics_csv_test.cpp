// The coordinator's metrics CSV across a restart: the rows of rounds before the checkpoint stay,
// the rows of rounds the resumed run redoes are dropped, and a file of another format is kept
// aside rather than mixed with new rows.
#include "server/metrics_csv.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../ml/test_support.hpp"
#include "file_size_limit.hpp"

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
  static const tern::ml::testing::ScratchDir scratch_dir("metrics-csv-test");
  const std::string path = scratch_dir.file(name);
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".old");
  return path;
}

mode_t modeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 0777;
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

TEST_CASE("a resumed coordinator drops a torn last line even of a round it keeps") {
  // Rows are synced before each checkpoint, so a torn row belongs to a round being redone; one
  // that claims an earlier round (its first field cut to a prefix) must not stay either.
  const std::string path = scratch("torn.csv");
  {
    server::MetricsCsv csv(path);
    for (uint64_t r = 0; r < 2; ++r) csv.write(record(r));
  }
  std::ofstream(path, std::ios::app) << "2,0.";  // of round 25, torn after its "2"
  { server::MetricsCsv csv(path, 3); }
  std::string expected = server::MetricsCsv::header() + "\n";
  for (uint64_t r = 0; r < 2; ++r) expected += server::MetricsCsv::row(record(r)) + "\n";
  CHECK(slurp(path) == expected);
}

// Peak resident memory of this process so far, in MiB.
long peakRssMiB() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

TEST_CASE("resuming a 64 MiB metrics CSV takes constant memory, not the file's size") {
  // A long run's file (rows of many workers) outgrows a small board's memory; it is streamed.
  const std::string path = scratch("long.csv");
  const std::string padding(4000, 'x');
  constexpr uint64_t kRows = 16384;  // 16,384 rows of about 4 kB: 64 MiB
  {
    std::ofstream out(path, std::ios::binary);
    out << server::MetricsCsv::header() << '\n';
    for (uint64_t r = 0; r < kRows; ++r) out << r << ",0," << padding << '\n';
  }
  const long before = peakRssMiB();
  { server::MetricsCsv csv(path, kRows - 10); }
  const long growth = peakRssMiB() - before;
  CHECK(growth < 16);  // reading the file whole and copying the rows kept took over 128 MiB
  std::ifstream in(path, std::ios::binary);
  std::string line;
  uint64_t rows = 0, last = 0;
  std::getline(in, line);
  CHECK(line == server::MetricsCsv::header());
  while (std::getline(in, line)) last = std::stoull(line), ++rows;
  CHECK(rows == kRows - 10);
  CHECK(last == kRows - 11);
  std::filesystem::remove(path);
}

TEST_CASE("a resumed metrics CSV that cannot be rewritten is left whole, and the start fails") {
  const std::string path = scratch("full_disk.csv");
  {
    server::MetricsCsv csv(path);
    for (uint64_t r = 0; r < 20; ++r) csv.write(record(r));
  }
  const std::string before = slurp(path);
  REQUIRE(before.size() > 600);
  {
    const tern::testing::FileSizeLimit limit(300);  // the kept rows of 10 rounds do not fit
    CHECK_THROWS_AS(server::MetricsCsv(path, 10), std::runtime_error);
  }
  CHECK(slurp(path) == before);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  // With room again the resumed file keeps rounds 0-9, readable as a fresh one is.
  { server::MetricsCsv csv(path, 10); }
  std::string expected = server::MetricsCsv::header() + "\n";
  for (uint64_t r = 0; r < 10; ++r) expected += server::MetricsCsv::row(record(r)) + "\n";
  CHECK(slurp(path) == expected);
  const std::string fresh = scratch("fresh_mode.csv");
  { server::MetricsCsv csv(fresh); }
  CHECK(modeOf(path) == modeOf(fresh));
}

TEST_CASE("a resumed metrics CSV behind a link, or with its own permissions, keeps them") {
  const std::string target = scratch("target.csv"), link = scratch("link.csv");
  {
    server::MetricsCsv csv(target);
    for (uint64_t r = 0; r < 4; ++r) csv.write(record(r));
  }
  ::chmod(target.c_str(), 0640);
  std::filesystem::create_symlink(target, link);
  {
    server::MetricsCsv csv(link, 2);
    csv.write(record(2));
  }
  CHECK(std::filesystem::is_symlink(link));
  CHECK(modeOf(target) == 0640);
  std::string expected = server::MetricsCsv::header() + "\n";
  for (uint64_t r = 0; r < 3; ++r) expected += server::MetricsCsv::row(record(r)) + "\n";
  CHECK(slurp(target) == expected);
}

TEST_CASE("a resumed metrics CSV that is a pipe is written on, not replaced by a file") {
  const std::string fifo = scratch("rows.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  {
    server::MetricsCsv csv(fifo, 5);
    CHECK(csv.write(record(5)));
    CHECK(csv.sync());  // nothing to sync on a pipe, and nothing to report
  }
  struct stat st {};
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  std::string got(4096, '\0');
  const ssize_t n = ::read(reader, got.data(), got.size());
  ::close(reader);
  REQUIRE(n > 0);
  got.resize(size_t(n));
  CHECK(got == server::MetricsCsv::header() + "\n" + server::MetricsCsv::row(record(5)) + "\n");
}

TEST_CASE("a row that cannot be written is cut off and reported, and the next row tries again") {
  const std::string path = scratch("part.csv");
  server::MetricsCsv csv(path);
  REQUIRE(csv.write(record(0)));
  const auto size = std::filesystem::file_size(path);
  {
    const tern::testing::FileSizeLimit limit(size + 5);  // five bytes of round 1's row fit
    CHECK_FALSE(csv.write(record(1)));
    CHECK_FALSE(csv.write(record(1)));
  }
  CHECK(std::filesystem::file_size(path) == size);
  CHECK(csv.write(record(2)));
  CHECK(csv.sync());
  CHECK(slurp(path) == server::MetricsCsv::header() + "\n" + server::MetricsCsv::row(record(0)) +
                           "\n" + server::MetricsCsv::row(record(2)) + "\n");
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

TEST_CASE("a metrics CSV whose header cannot be written is refused at the start, with why") {
  REQUIRE_MESSAGE(std::filesystem::exists("/dev/full"), "no /dev/full to fail the writes");
  std::string error;
  try {
    server::MetricsCsv csv("/dev/full");
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  CHECK(error ==
        std::string("/dev/full: cannot write the metrics CSV's header: ") + std::strerror(ENOSPC));
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
  CHECK(server::finalLine(3, std::nullopt, {10, 15, 20}) ==
        "final: rounds=3 test_accuracy=none upload_bytes=10 download_bytes=15 full_bytes=20");
  CHECK(server::finalLine(600, 0.81234, {4990000, 9800000, 75360000}) ==
        "final: rounds=600 test_accuracy=0.8123 upload_bytes=4990000 download_bytes=9800000 "
        "full_bytes=75360000");
}

TEST_CASE("a round's progress line says acc=- until an evaluation has measured it") {
  server::RoundRecord r;
  r.round = 3;
  CHECK(server::progressLine(r).find(" acc=- ") != std::string::npos);
  r.test_accuracy = 0.5;
  r.accuracy_measured = true;
  CHECK(server::progressLine(r).find(" acc=0.5000 ") != std::string::npos);
}
