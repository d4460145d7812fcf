#include "common/telemetry/json.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace tern::telemetry;

TEST_CASE("a written document reads back with the same members and values") {
  JsonWriter w;
  w.beginObject();
  w.key("name").value("w\"0\\\n\x01");
  w.key("round").value(uint64_t(9007199254740993ull >> 1));
  w.key("neg").value(int64_t(-42));
  w.key("loss").value(0.1);
  w.key("ok").value(true);
  w.key("none").null();
  w.key("list")
      .beginArray()
      .value(1.5)
      .beginObject()
      .endObject()
      .beginArray()
      .endArray()
      .endArray();
  w.endObject();

  JsonValue v = parseJson(w.str());
  CHECK(v.find("name")->string() == "w\"0\\\n\x01");
  CHECK(v.find("round")->number() == double(9007199254740993ull >> 1));
  CHECK(v.find("neg")->number() == -42);
  CHECK(v.find("loss")->number() == 0.1);  // shortest round-trip form, not 6 digits
  CHECK(v.find("ok")->boolean());
  CHECK(v.find("none") == nullptr);  // null members count as absent
  CHECK(v.object().at("none").isNull());
  const auto& list = v.find("list")->array();
  REQUIRE(list.size() == 3);
  CHECK(list[0].number() == 1.5);
  CHECK(list[1].object().empty());
  CHECK(list[2].array().empty());
}

TEST_CASE("random doubles survive writing and reading bit for bit") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-300, 300);
  for (int i = 0; i < 2000; ++i) {
    double d = std::pow(10.0, exponent(rng)) * (i % 2 ? -1 : 1);
    JsonWriter w;
    w.beginArray().value(d).endArray();
    CHECK(parseJson(w.str()).array()[0].number() == d);
  }
}

TEST_CASE("non-finite numbers are written as null because JSON cannot spell them") {
  JsonWriter w;
  w.beginArray().value(std::nan("")).value(std::numeric_limits<double>::infinity()).endArray();
  CHECK(w.str() == "[null,null]");
}

TEST_CASE("unicode escapes decode to UTF-8, surrogate pairs included") {
  CHECK(parseJson(R"("\u00e9")").string() == "\xc3\xa9");
  CHECK(parseJson(R"("\u20ac")").string() == "\xe2\x82\xac");
  CHECK(parseJson(R"("\ud83d\ude00")").string() == "\xf0\x9f\x98\x80");
  CHECK_THROWS_AS(parseJson(R"("\ud83d")"), JsonError);
  CHECK_THROWS_AS(parseJson(R"("\ude00")"), JsonError);
}

TEST_CASE("malformed documents are refused, never half-read") {
  const char* bad[] = {"",      "{",       "{\"a\":}", "{\"a\" 1}", "[1,]",    "[1 2]",
                       "01",    "1.",      ".5",       "+1",        "1e",      "-",
                       "tru",   "nul",     "\"abc",    "\"a\tb\"",  "\"\\x\"", "{\"a\":1,}",
                       "{a:1}", "[1] [2]", "inf",      "NaN",       "1e999",   "{\"a\":1,\"a\":2}"};
  for (const char* doc : bad) {
    CAPTURE(doc);
    CHECK_THROWS_AS(parseJson(doc), JsonError);
  }
}

TEST_CASE("nesting deeper than the limit is refused instead of exhausting the stack") {
  std::string deep(100000, '[');
  CHECK_THROWS_AS(parseJson(deep), JsonError);
  std::string ok = std::string(10, '[') + std::string(10, ']');
  CHECK_NOTHROW(parseJson(ok, 10));
  CHECK_THROWS_AS(parseJson(std::string(11, '[') + std::string(11, ']'), 10), JsonError);
}

TEST_CASE("typed accessors and fallbacks tell a wrong type from an absent member") {
  JsonValue v = parseJson(R"({"n": 3, "s": "x", "z": null})");
  CHECK(v.numberOr("n", -1) == 3);
  CHECK(v.numberOr("s", -1) == -1);
  CHECK(v.numberOr("missing", -1) == -1);
  CHECK(v.stringOr("s", "") == "x");
  CHECK(v.stringOr("z", "fallback") == "fallback");
  CHECK_THROWS_AS(v.find("s")->number(), JsonError);
  CHECK_THROWS_AS(v.array(), JsonError);
}
