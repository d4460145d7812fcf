#include "common/telemetry/process_metrics.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

using namespace tern::telemetry;

TEST_CASE("a /proc stat line converts ticks and pages, even with parentheses in the name") {
  // Fields 1-24 of proc(5): utime 14 = 250 ticks, stime 15 = 50, starttime 22 = 1000,
  // vsize 23 = 8192000 bytes, rss 24 = 300 pages.
  const std::string line =
      "4242 (tern (x) y) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 1000 8192000 "
      "300 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 17 1 0 0 0 0 0";
  ProcUnits units{100.0, 4096.0, 1.7e9};
  ProcessSample s;
  REQUIRE(parseProcStat(line, units, s));
  CHECK(s.cpu_seconds == doctest::Approx(3.0));
  CHECK(s.start_time_seconds == doctest::Approx(1.7e9 + 10.0));
  CHECK(s.virtual_bytes == 8192000.0);
  CHECK(s.resident_bytes == 300.0 * 4096.0);
}

TEST_CASE("a line that is not a /proc stat line is refused") {
  ProcessSample s;
  CHECK_FALSE(parseProcStat("", ProcUnits{}, s));
  CHECK_FALSE(parseProcStat("12 (short) S 1 2 3", ProcUnits{}, s));
  CHECK_FALSE(parseProcStat("12 (x) S 1 2 3 4 5 6 7 8 9 10 x y 13 14 15 16 17 18 19 20 21 22",
                            ProcUnits{}, s));
}

TEST_CASE("opening a file is one more open descriptor") {
  auto before = readProcessSample();
  REQUIRE(before);
  int fd = open("/proc/self/stat", O_RDONLY);
  REQUIRE(fd >= 0);
  auto during = readProcessSample();
  close(fd);
  REQUIRE(during);
  CHECK(during->open_fds == before->open_fds + 1);
}
