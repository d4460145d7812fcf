#include "common/telemetry/json.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "common/telemetry/node_status.hpp"

using namespace tern::telemetry;

TEST_CASE("a written document reads back with the same members and values") {
  OrderedJson doc;
  doc["name"] = "w\"0\\\n\x01";
  doc["round"] = uint64_t(9007199254740993ull >> 1);
  doc["neg"] = int64_t(-42);
  doc["loss"] = 0.1;
  doc["ok"] = true;
  doc["none"] = nullptr;
  doc["list"] = OrderedJson::array({1.5, OrderedJson::object(), OrderedJson::array()});
  const std::string text = dumpJson(doc);
  CHECK(text.find(R"("name":"w\"0\\\n\u0001")") != std::string::npos);

  Json v = parseJson(text);
  CHECK(jsonFind(v, "name")->get<std::string>() == "w\"0\\\n\x01");
  CHECK(jsonNumberOr(v, "round", 0) == double(9007199254740993ull >> 1));
  CHECK(jsonNumberOr(v, "neg", 0) == -42);
  CHECK(jsonNumberOr(v, "loss", 0) == 0.1);  // shortest round-trip form, not 6 digits
  CHECK(jsonFind(v, "ok")->get<bool>());
  CHECK(jsonFind(v, "none") == nullptr);  // null members count as absent
  CHECK(v.at("none").is_null());
  const Json& list = *jsonFind(v, "list");
  REQUIRE(list.size() == 3);
  CHECK(list[0].get<double>() == 1.5);
  CHECK(list[1].is_object());
  CHECK(list[1].empty());
  CHECK(list[2].is_array());
  CHECK(list[2].empty());
}

TEST_CASE("members are written in the order given") {
  NodeStatus s;
  s.workers.emplace_back();
  const std::string text = toJson(s);
  CHECK(text.rfind(R"({"role":"","name":"","version":"","state":"","round":0,)", 0) == 0);
  CHECK(text.find(R"("workers":[{"id":0,"name":"","alive":false,)") != std::string::npos);
}

TEST_CASE("random doubles of the status document survive writing and reading bit for bit") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-300, 300);
  for (int i = 0; i < 2000; ++i) {
    double d = std::pow(10.0, exponent(rng)) * (i % 2 ? -1 : 1);
    NodeStatus s;
    s.train_loss = d;
    CHECK(jsonNumberOr(parseJson(toJson(s)), "train_loss", 0) == d);
  }
}

TEST_CASE("non-finite numbers are written as null because JSON cannot spell them") {
  OrderedJson doc = OrderedJson::array({std::nan(""), std::numeric_limits<double>::infinity()});
  CHECK(dumpJson(doc) == "[null,null]");
  NodeStatus s;
  s.train_loss = std::nan("");
  s.workers.emplace_back();
  s.workers[0].link.b_stderr = std::numeric_limits<double>::infinity();
  const std::string text = toJson(s);
  CHECK(text.find(R"("train_loss":null)") != std::string::npos);
  CHECK(text.find(R"("b_stderr":null)") != std::string::npos);
}

TEST_CASE("a name that is not UTF-8 still makes a valid document") {
  NodeStatus s;
  s.name = "pi\xff\xfe";
  CHECK(parseJson(toJson(s)).at("name").get<std::string>() == "pi\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_CASE("unicode escapes decode to UTF-8, surrogate pairs included") {
  CHECK(parseJson(R"("\u00e9")").get<std::string>() == "\xc3\xa9");
  CHECK(parseJson(R"("\u20ac")").get<std::string>() == "\xe2\x82\xac");
  CHECK(parseJson(R"("\ud83d\ude00")").get<std::string>() == "\xf0\x9f\x98\x80");
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
  // A repeated name in a nested object is refused too; the same name in two objects is fine.
  CHECK_THROWS_AS(parseJson(R"({"a":{"b":1,"b":2}})"), JsonError);
  CHECK_NOTHROW(parseJson(R"({"a":{"b":1},"c":{"b":2},"b":3})"));
}

TEST_CASE("nesting deeper than the limit is refused instead of exhausting the stack") {
  std::string deep(100000, '[');
  CHECK_THROWS_AS(parseJson(deep), JsonError);
  std::string ok = std::string(10, '[') + std::string(10, ']');
  CHECK_NOTHROW(parseJson(ok, 10));
  CHECK_THROWS_AS(parseJson(std::string(11, '[') + std::string(11, ']'), 10), JsonError);
  CHECK_THROWS_AS(parseJson(std::string(11, '[') + "{}" + std::string(11, ']'), 11), JsonError);
}

TEST_CASE("fallbacks tell a wrong type from an absent member") {
  Json v = parseJson(R"({"n": 3, "s": "x", "z": null})");
  CHECK(jsonNumberOr(v, "n", -1) == 3);
  CHECK(jsonNumberOr(v, "s", -1) == -1);
  CHECK(jsonNumberOr(v, "missing", -1) == -1);
  CHECK(jsonStringOr(v, "s", "") == "x");
  CHECK(jsonStringOr(v, "z", "fallback") == "fallback");
  CHECK(jsonFind(v, "s") != nullptr);
  CHECK(jsonFind(parseJson("[1]"), "n") == nullptr);  // a non-object has no members
}
