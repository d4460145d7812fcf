#pragma once
// Command-line pieces both daemons share: the HTTP endpoint flags, each overriding its key of
// the YAML's `http:` section, and the `keygen` subcommand. Header-only: only the daemons' main()
// files use it.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/telemetry/daemon_telemetry.hpp"
#include "common/transport/curve_keys.hpp"

namespace tern::telemetry {

struct HttpFlags {
  std::string bind;
  std::string url_file;
};

inline void addHttpFlags(CLI::App& app, HttpFlags& flags) {
  app.add_option(
      "--http", flags.bind,
      "serve /metrics /status /healthz on HOST:PORT (port 0: any free port; overrides http.bind)");
  app.add_option("--http-url-file", flags.url_file,
                 "write the endpoint's URL here (overrides http.url_file)");
}

// The endpoint: the configuration's http section, each flag given overriding its key. An --http
// that cannot be bound is a config::ConfigError.
inline TelemetryOptions telemetryOptions(const config::HttpSettings& yaml, const HttpFlags& flags) {
  if (!flags.bind.empty()) {
    if (std::string why = config::httpBindProblem(flags.bind); !why.empty())
      throw config::ConfigError("--http " + why);
  }
  TelemetryOptions t;
  t.http_bind = flags.bind.empty() ? yaml.bind : flags.bind;
  t.http_url_file = flags.url_file.empty() ? yaml.url_file : flags.url_file;
  t.stale_after_seconds = yaml.stale_after_seconds;
  // Said at start-up with the other command-line errors (exit 2), not after the data has loaded.
  if (t.http_bind.empty() && !t.http_url_file.empty()) {
    throw config::ConfigError("--http-url-file needs an HTTP address (--http or http.bind)");
  }
  return t;
}

struct KeygenCommand {
  CLI::App* command = nullptr;
  std::string out;
  bool force = false;
  bool chosen() const { return command != nullptr && command->parsed(); }
  int run() const { return transport::runKeygenCommand(out, force, std::cout, std::cerr); }
};

inline void addKeygenCommand(CLI::App& app, KeygenCommand& k) {
  k.command = app.add_subcommand("keygen", "write a CURVE key pair: OUT.pub and OUT.key (0600)");
  k.command->add_option("--out", k.out, "DIR/NAME of the key files")->required();
  k.command->add_flag("--force", k.force, "replace existing key files");
}

}  // namespace tern::telemetry
