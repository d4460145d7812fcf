#pragma once
// The process_* metrics every Prometheus client library exports (CPU time, memory, descriptors,
// start time), read from /proc/self when /metrics is scraped, so dashboards and alerts written
// for any exporter work on the daemons too. Where /proc cannot be read there are none.
#include <optional>
#include <string>

namespace tern::telemetry {

struct ProcessSample {
  double cpu_seconds = 0.0;         // user + system
  double resident_bytes = 0.0;      // resident set size
  double virtual_bytes = 0.0;       // virtual memory size
  double start_time_seconds = 0.0;  // since the Unix epoch
  double open_fds = 0.0;
  double max_fds = 0.0;  // the soft RLIMIT_NOFILE
};

// What the kernel's units mean for /proc/PID/stat.
struct ProcUnits {
  double ticks_per_second = 100.0;  // sysconf(_SC_CLK_TCK)
  double page_bytes = 4096.0;       // sysconf(_SC_PAGESIZE)
  double boot_time_seconds = 0.0;   // btime of /proc/stat
};

// Fills the CPU, memory and start-time fields from one /proc/PID/stat line, whose command name
// (in parentheses) may itself hold spaces and parentheses. False when the line is not one.
bool parseProcStat(const std::string& line, const ProcUnits& units, ProcessSample& out);

// This process now; nullopt where /proc/self cannot be read.
std::optional<ProcessSample> readProcessSample();

// The process_* families in the text exposition format; empty without a sample.
std::string processMetricsText();

}  // namespace tern::telemetry
