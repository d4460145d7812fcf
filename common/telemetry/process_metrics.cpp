#include "common/telemetry/process_metrics.hpp"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace tern::telemetry {

namespace {

// btime of /proc/stat: when the system booted, in seconds since the epoch; 0 if unreadable.
double bootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double t = 0.0;
      in >> t;
      return t;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0.0;
}

double countOpenFds() {
  std::error_code ec;
  double n = 0.0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    n += 1.0;
  }
  return n;
}

prometheus::MetricFamily family(const std::string& name, const std::string& help,
                                prometheus::MetricType type, double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  f.metric.emplace_back();
  if (type == prometheus::MetricType::Counter) {
    f.metric.back().counter.value = value;
  } else {
    f.metric.back().gauge.value = value;
  }
  return f;
}

}  // namespace

bool parseProcStat(const std::string& line, const ProcUnits& units, ProcessSample& out) {
  // Fields from the state on (field 3 of proc(5)), after the last ')' that closes the name.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(line.substr(close + 1));
  std::vector<std::string> f;
  for (std::string token; in >> token;) f.push_back(token);
  // proc(5) numbers from 1: utime 14, stime 15, starttime 22, vsize 23, rss 24.
  auto field = [&f](size_t number) { return std::stod(f.at(number - 3)); };
  try {
    out.cpu_seconds = (field(14) + field(15)) / units.ticks_per_second;
    out.start_time_seconds = units.boot_time_seconds + field(22) / units.ticks_per_second;
    out.virtual_bytes = field(23);
    out.resident_bytes = field(24) * units.page_bytes;
  } catch (const std::exception&) {  // too few fields, or one that is not a number
    return false;
  }
  return true;
}

std::optional<ProcessSample> readProcessSample() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  ProcUnits units;
  units.ticks_per_second = double(sysconf(_SC_CLK_TCK));
  units.page_bytes = double(sysconf(_SC_PAGESIZE));
  units.boot_time_seconds = bootTimeSeconds();
  ProcessSample s;
  if (units.ticks_per_second <= 0 || units.page_bytes <= 0 || !parseProcStat(line, units, s)) {
    return std::nullopt;
  }
  s.open_fds = countOpenFds();
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) s.max_fds = double(limit.rlim_cur);
  return s;
}

std::string processMetricsText() {
  auto s = readProcessSample();
  if (!s) return {};
  using prometheus::MetricType;
  const std::vector<prometheus::MetricFamily> families = {
      family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
             MetricType::Counter, s->cpu_seconds),
      family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
             s->resident_bytes),
      family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
             s->virtual_bytes),
      family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
             MetricType::Gauge, s->start_time_seconds),
      family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
             s->open_fds),
      family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
             s->max_fds),
  };
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace tern::telemetry
