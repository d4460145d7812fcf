#include "common/transport/allowlist.hpp"

#include <doctest/doctest.h>

#include "common/transport/zap_handler.hpp"
#include "test_files.hpp"

using namespace tern::transport;
using tern::transport::testing::TempDir;

namespace {

const std::string kA = "HelloWorldHelloWorldHelloWorldHelloWorld";
const std::string kB = "0000000000000000000000000000000000000000";
const std::string kC = "abcdeabcdeabcdeabcdeabcdeabcdeabcdeabcde";

// A ZAP request as libzmq sends it for a CURVE client with public key `z85`.
std::vector<std::string> curveRequest(const std::string& z85, const std::string& id = "7") {
  auto bytes = decodeZ85Key(z85);
  return {"1.0", id, "tern", "127.0.0.1", "", "CURVE", std::string(bytes.begin(), bytes.end())};
}

}  // namespace

TEST_CASE("an allowlist file admits its keys under their labels or their line") {
  TempDir dir;
  auto f = dir.write("workers", "# lab\n" + kA + " pi-1\n\n" + kB + "\n");
  auto list = Allowlist::load(f);
  CHECK(list.size() == 2);
  CHECK(list.find(kA) == std::optional<std::string>("pi-1"));
  CHECK(list.find(kB) == std::optional<std::string>(f + ":4"));
  CHECK_FALSE(list.find(kC));
  CHECK(list.source() == f);
}

TEST_CASE("a key with names= may join under those names only, a key without under any") {
  TempDir dir;
  auto f = dir.write("workers",
                     kA + " pi-1 names=pi-1,spare\n" + kB + " names=lab-*\n" + kC + " pi-3\n");
  auto list = Allowlist::load(f);
  CHECK(list.find(kA) == std::optional<std::string>("pi-1"));  // names= is not part of the label
  CHECK(list.mayUse(kA, "pi-1"));
  CHECK(list.mayUse(kA, "spare"));
  CHECK_FALSE(list.mayUse(kA, "pi-3"));  // another worker's name
  CHECK_FALSE(list.mayUse(kA, "pi-10"));
  CHECK(list.mayUse(kB, "lab-7"));  // a trailing * matches any rest
  CHECK(list.mayUse(kB, "lab-"));
  CHECK_FALSE(list.mayUse(kB, "lab"));
  CHECK_FALSE(list.mayUse(kB, "pi-1"));
  // Without names= (allowlists written before names were bound): any name.
  CHECK(list.mayUse(kC, "pi-1"));
  CHECK(list.unboundKeys() == 1);
  // A key not on the list may use no name at all.
  CHECK_FALSE(list.mayUse("1111111111111111111111111111111111111111", "pi-1"));
}

TEST_CASE("an allowlist directory admits the keys of its .pub files and nothing else") {
  TempDir dir;
  dir.write("pi-1.pub", "# public\n" + kA + "\n");
  dir.write("pi-2.pub", kB + " second\n");
  dir.write("pi-3.key", kC + "\n");  // a secret key file in the wrong place is not a public key
  dir.write("README", "these are the workers\n");
  auto list = Allowlist::load(dir.path().string());
  CHECK(list.size() == 2);
  CHECK(list.find(kA) == std::optional<std::string>("pi-1"));
  CHECK(list.find(kB) == std::optional<std::string>("second"));
  CHECK_FALSE(list.find(kC));
}

TEST_CASE("an allowlist that is missing or holds a bad line is refused with its position") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(Allowlist::load(dir.file("absent")),
                       (dir.file("absent") + ": allowlist not found").c_str(), KeyFileError);
  auto bad = dir.write("bad", kA + "\nnot-a-key\n");
  CHECK_THROWS_WITH_AS(Allowlist::load(bad),
                       doctest::Contains((bad + ":2: not a CURVE key").c_str()), KeyFileError);
  TempDir d2;
  d2.write("empty.pub", "# nothing here\n");
  CHECK_THROWS_WITH_AS(Allowlist::load(d2.path().string()),
                       doctest::Contains("empty.pub: no CURVE key"), KeyFileError);
}

TEST_CASE("an empty allowlist file admits nobody") {
  TempDir dir;
  auto list = Allowlist::load(dir.write("none", "# no workers yet\n"));
  CHECK(list.size() == 0);
  CHECK_FALSE(list.find(kA));
}

TEST_CASE("the ZAP handler admits an allowlisted CURVE key with status 200 and its key as user") {
  TempDir dir;
  auto list = Allowlist::load(dir.write("w", kA + " pi-1\n"));
  ZapVerdict v;
  auto reply = answerZapRequest(curveRequest(kA, "req-9"), list, v);
  CHECK(reply == std::vector<std::string>{"1.0", "req-9", "200", "OK", kA, ""});
  CHECK(v.admitted);
  CHECK(v.label == "pi-1");
  CHECK(v.public_key == kA);
  CHECK(v.address == "127.0.0.1");
}

TEST_CASE("the ZAP handler refuses an unknown key, another mechanism and a malformed request") {
  TempDir dir;
  auto list = Allowlist::load(dir.write("w", kA + "\n"));
  ZapVerdict v;
  auto reply = answerZapRequest(curveRequest(kB), list, v);
  REQUIRE(reply.size() == 6);
  CHECK(reply[1] == "7");
  CHECK(reply[2] == "400");
  CHECK_FALSE(v.admitted);
  CHECK(v.public_key == kB);
  CHECK(v.reason == "key not on the allowlist");

  auto null_request = curveRequest(kA);
  null_request[5] = "NULL";
  null_request.pop_back();
  reply = answerZapRequest(null_request, list, v);
  CHECK(reply[2] == "400");
  CHECK_FALSE(v.admitted);

  auto short_key = curveRequest(kA);
  short_key[6].pop_back();
  CHECK(answerZapRequest(short_key, list, v)[2] == "400");
  CHECK_FALSE(v.admitted);

  reply = answerZapRequest({"2.0", "x", "tern", "127.0.0.1", "", "CURVE"}, list, v);
  CHECK(reply == std::vector<std::string>{"1.0", "x", "500", "malformed request", "", ""});
  CHECK_FALSE(v.admitted);
  CHECK(answerZapRequest({}, list, v).size() == 6);
}
