#pragma once
// One log format for both daemons: text lines "[time] [program name] [level] message" on
// stdout or, with logging.format: json, one JSON object a line ({"time", "level", "program",
// "name", "message"}) on stderr for a log shipper (stdout keeps the run's summary lines). Times
// are UTC, ISO 8601 with milliseconds.
#include <spdlog/formatter.h>

#include <memory>
#include <string>

namespace tern::daemon {

// The formatter of logging.format for `program` ("coordinator", "worker") named `name`.
std::unique_ptr<spdlog::formatter> logFormatter(bool json, const std::string& program,
                                                const std::string& name);

// Sets the default logger's level (logging.level) and format (json: logging.format: json).
void configureLogging(const std::string& level, bool json, const std::string& program,
                      const std::string& name);

}  // namespace tern::daemon
