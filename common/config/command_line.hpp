#pragma once
// Command-line handling shared by the daemons and the simulator. Header-only: only main() files
// use it. A bad command line is a configuration error: CLI11's message, exit status 2 (--help
// and --version exit 0).
#include <CLI/CLI.hpp>
#include <cmath>
#include <optional>
#include <string>

namespace tern::config {

// --log-level, checked against the levels the YAML's logging.level accepts.
inline void addLogLevelOption(CLI::App& app, std::string& level) {
  app.add_option("--log-level", level, "trace|debug|info|warn|error|off (overrides logging.level)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

// A finite number >= `min` (or > `min` when `strict`). CLI::Range lets NaN through: every
// comparison with it is false.
inline CLI::Validator finiteNumber(double min, bool strict) {
  return CLI::Validator(
      [min, strict](std::string& input) -> std::string {
        double v = 0.0;
        if (!CLI::detail::lexical_cast(input, v) || !std::isfinite(v) || v < min ||
            (strict && v == min)) {
          return "Value " + input + " is not a finite number " + (strict ? "> " : ">= ") +
                 CLI::detail::to_string(min);
        }
        return {};
      },
      strict ? "POSITIVE" : "NONNEGATIVE");
}

// Parses the command line; an exit status when the program should stop here, nullopt to go on.
inline std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

}  // namespace tern::config
