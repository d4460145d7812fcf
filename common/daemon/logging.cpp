#include "common/daemon/logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace tern::daemon {
namespace {

// "2026-12-05T23:59:58.123Z" of a log record's time.
std::string isoTime(spdlog::log_clock::time_point t) {
  const auto since = t.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(since - secs).count();
  const std::time_t tt = secs.count();
  std::tm utc{};
  gmtime_r(&tt, &utc);
  char text[40];
  const size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return std::string(text, n) + "." + fmt::format("{:03d}", ms) + "Z";
}

// One JSON object a line; text that is not UTF-8 is replaced, never dropped or thrown on.
class JsonFormatter : public spdlog::formatter {
 public:
  JsonFormatter(std::string program, std::string name)
      : program_(std::move(program)), name_(std::move(name)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto level = spdlog::level::to_string_view(msg.level);
    nlohmann::json line = {{"time", isoTime(msg.time)},
                           {"level", std::string(level.data(), level.size())},
                           {"program", program_},
                           {"name", name_},
                           {"message", std::string(msg.payload.data(), msg.payload.size())}};
    const std::string text =
        line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(program_, name_);
  }

 private:
  std::string program_, name_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> logFormatter(bool json, const std::string& program,
                                                const std::string& name) {
  if (json) return std::make_unique<JsonFormatter>(program, name);
  const std::string who = name.empty() || name == program ? program : program + " " + name;
  // A '%' in the name is doubled: the pattern would read it as a flag.
  std::string escaped;
  for (char c : who) escaped += c == '%' ? std::string("%%") : std::string(1, c);
  return std::make_unique<spdlog::pattern_formatter>(
      "[%Y-%m-%dT%H:%M:%S.%eZ] [" + escaped + "] [%l] %v", spdlog::pattern_time_type::utc);
}

void configureLogging(const std::string& level, bool json, const std::string& program,
                      const std::string& name) {
  if (json) {
    // The JSON stream stays JSON: the run's summary lines keep stdout to themselves.
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("", std::move(sink)));
  }
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_formatter(logFormatter(json, program, name));
}

}  // namespace tern::daemon
