// The daemons' log format: text lines name the program and level; JSON lines are one object
// each, parsed back here with nlohmann-json, with text that is not UTF-8 replaced, not thrown on.
#include "common/daemon/logging.hpp"

#include <doctest/doctest.h>
#include <spdlog/details/log_msg.h>

#include <nlohmann/json.hpp>
#include <string>

namespace {

std::string formatted(bool json, const std::string& name, spdlog::level::level_enum level,
                      const std::string& text) {
  auto f = tern::daemon::logFormatter(json, "worker", name);
  spdlog::details::log_msg msg(spdlog::source_loc{}, "", level, text);
  spdlog::memory_buf_t out;
  f->format(msg, out);
  return std::string(out.data(), out.size());
}

}  // namespace

TEST_CASE("a JSON log line is one object with the time, level, program, name and message") {
  const std::string line = formatted(true, "pi-3", spdlog::level::warn, "a \"quoted\"\nline");
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);  // one line, the message's newline escaped
  const auto j = nlohmann::json::parse(line);
  CHECK(j.at("level") == "warning");
  CHECK(j.at("program") == "worker");
  CHECK(j.at("name") == "pi-3");
  CHECK(j.at("message") == "a \"quoted\"\nline");
  const std::string time = j.at("time");
  CHECK(time.size() == 24);  // 2026-12-05T23:59:58.123Z
  CHECK(time[10] == 'T');
  CHECK(time.back() == 'Z');
}

TEST_CASE("a JSON log line of bytes that are not UTF-8 still parses") {
  const std::string line = formatted(true, "w", spdlog::level::info, std::string("bad \xff\xfe"));
  const auto j = nlohmann::json::parse(line);
  CHECK(j.at("message").get<std::string>().rfind("bad ", 0) == 0);
}

TEST_CASE("a text log line names the program, the worker and the level") {
  const std::string line = formatted(false, "pi-3", spdlog::level::info, "joined");
  CHECK(line.find("] [worker pi-3] [info] joined") != std::string::npos);
  CHECK(line.front() == '[');
  const std::string percent = formatted(false, "100%", spdlog::level::info, "x");
  CHECK(percent.find("[worker 100%] [info] x") != std::string::npos);
}
