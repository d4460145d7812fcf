#include "common/transport/curve_keys.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <functional>
#include <sstream>

#include "test_files.hpp"

using namespace tern::transport;
using tern::transport::testing::TempDir;

namespace {

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const KeyFileError& e) {
    return e.what();
  }
  return "";
}

unsigned modeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// The test vector of the Z85 specification (ZeroMQ RFC 32): these 8 bytes are "HelloWorld".
const uint8_t kRfcBytes[8] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B};

}  // namespace

TEST_CASE("a 32-byte key encodes to the Z85 text of the specification's test vector") {
  uint8_t key[kCurveKeyBytes];
  for (size_t i = 0; i < kCurveKeyBytes; ++i) key[i] = kRfcBytes[i % 8];
  const std::string text = encodeZ85Key(key);
  CHECK(text == "HelloWorldHelloWorldHelloWorldHelloWorld");
  auto back = decodeZ85Key(text);
  CHECK(std::equal(back.begin(), back.end(), key));
}

TEST_CASE("only 40 characters of the Z85 alphabet that fit 32 bits per group are a key") {
  CHECK(isZ85Key("HelloWorldHelloWorldHelloWorldHelloWorld"));
  CHECK_FALSE(isZ85Key("HelloWorldHelloWorldHelloWorldHelloWorl"));    // 39 characters
  CHECK_FALSE(isZ85Key("HelloWorldHelloWorldHelloWorldHelloWorld0"));  // 41 characters
  CHECK_FALSE(isZ85Key("HelloWorldHelloWorldHelloWorldHello,orld"));   // ',' is not Z85
  CHECK_FALSE(isZ85Key("HelloWorldHelloWorldHelloWorldHello orld"));
  // "#####" is 85^5 - 1, more than a 32-bit group can hold.
  CHECK_FALSE(isZ85Key("#####WorldHelloWorldHelloWorldHelloWorld"));
  CHECK_THROWS_AS(decodeZ85Key("too short"), std::invalid_argument);
}

TEST_CASE("a generated key pair is valid Z85 and its public key derives from its secret key") {
  REQUIRE(curveAvailable());
  auto a = generateCurveKeyPair();
  auto b = generateCurveKeyPair();
  CHECK(isZ85Key(a.public_key));
  CHECK(isZ85Key(a.secret_key));
  CHECK(curvePublicKeyOf(a.secret_key) == a.public_key);
  CHECK(a.secret_key != b.secret_key);
  CHECK(a.public_key != a.secret_key);
}

TEST_CASE("key text: keys with labels, comments and blank lines, with Windows line ends") {
  const std::string k1 = "HelloWorldHelloWorldHelloWorldHelloWorld";
  const std::string k2 = "0000000000000000000000000000000000000000";
  // No key starts with '#' (84 * 85^4 overflows 32 bits), so a comment never hides a key.
  const std::string comment = "#elloWorldHelloWorldHelloWorldHelloWorld";
  auto keys = parseKeyText(
      "# workers of the lab\r\n\r\n" + k1 + "  pi-3 (lab)\r\n" + k2 + "\n" + comment + "\n",
      "list");
  REQUIRE(keys.size() == 2);
  CHECK(keys[0].key == k1);
  CHECK(keys[0].label == "pi-3 (lab)");
  CHECK(keys[0].line == 3);
  CHECK(keys[1].key == k2);
  CHECK(keys[1].label.empty());
  CHECK(keys[1].line == 4);
}

TEST_CASE("a line that is neither a key nor a comment names file and line, not its content") {
  auto msg = errorOf([] { parseKeyText("# ok\nsecret-material-here x\n", "f.key"); });
  CHECK(msg ==
        "f.key:2: not a CURVE key: expected 40 Z85 characters, found a word of 20 characters");
  CHECK(msg.find("secret-material") == std::string::npos);
}

TEST_CASE("a key file must exist and hold exactly one key") {
  TempDir dir;
  const std::string k = "HelloWorldHelloWorldHelloWorldHelloWorld";
  CHECK(readKeyFile(dir.write("one.key", "# c\n" + k + "\n"), "secret key file") == k);
  CHECK(errorOf([&] { readKeyFile(dir.file("none.key"), "secret key file"); }) ==
        dir.file("none.key") + ": secret key file not found");
  CHECK(errorOf([&] {
          readKeyFile(dir.write("empty.key", "# nothing\n"), "secret key file");
        }).find(": no CURVE key in the secret key file") != std::string::npos);
  CHECK(errorOf([&] { readKeyFile(dir.write("two.key", k + "\n" + k + "\n"), "key"); }) ==
        dir.file("two.key") + ":2: the key must hold one key, found another one here");
  CHECK(errorOf([&] {
          readKeyFile(dir.write("short.key", k.substr(1) + "\n"), "key");
        }).find("short.key:1: not a CURVE key") != std::string::npos);
  CHECK(errorOf([&] { readKeyFile(dir.path().string(), "key"); }).find("not a regular file") !=
        std::string::npos);
}

TEST_CASE("keygen writes a public file and a secret file created with mode 0600") {
  TempDir dir;
  const mode_t old = ::umask(0);  // even a permissive umask must not open the secret to others
  auto keys = generateCurveKeyPair();
  auto w = writeKeyPair(dir.file("pi-3"), keys, false);
  ::umask(old);
  CHECK(w.public_file == dir.file("pi-3.pub"));
  CHECK(w.secret_file == dir.file("pi-3.key"));
  CHECK(modeOf(w.secret_file) == 0600);
  CHECK(modeOf(w.public_file) == 0644);
  CHECK_FALSE(worldReadable(w.secret_file));
  CHECK(worldReadable(w.public_file));
  CHECK(readSecretKeyFile(w.secret_file) == keys.secret_key);
  auto lines = readKeyLines(w.public_file, "public");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].key == keys.public_key);
  CHECK(lines[0].label == "pi-3");
}

TEST_CASE("keygen refuses to overwrite either file unless forced, and a forced secret is 0600") {
  TempDir dir;
  const std::string base = dir.file("w");
  dir.write("w.pub", "old public\n");
  ::chmod(dir.file("w.pub").c_str(), 0644);
  auto first = generateCurveKeyPair();
  CHECK(errorOf([&] { writeKeyPair(base, first, false); }) ==
        dir.file("w.pub") + ": already exists (use --force to replace it)");
  CHECK_FALSE(std::filesystem::exists(dir.file("w.key")));  // nothing half-written
  dir.write("w.key", "old secret\n");
  ::chmod(dir.file("w.key").c_str(), 0644);
  auto w = writeKeyPair(base, first, true);
  CHECK(modeOf(w.secret_file) == 0600);
  CHECK(readKeyFile(w.secret_file, "secret") == first.secret_key);
  CHECK(readKeyLines(w.public_file, "public").at(0).key == first.public_key);
}

TEST_CASE("the keygen command reports the written files and fails cleanly on a bad path") {
  TempDir dir;
  std::ostringstream out, err;
  CHECK(runKeygenCommand(dir.file("c"), false, out, err) == 0);
  CHECK(out.str().find(dir.file("c.key") + " (secret, mode 0600)") != std::string::npos);
  CHECK(runKeygenCommand(dir.file("c"), false, out, err) == 1);
  CHECK(err.str().find("already exists") != std::string::npos);
  CHECK(runKeygenCommand(dir.file("no/such/dir/c"), false, out, err) == 1);
  CHECK(err.str().find("cannot create") != std::string::npos);
}

TEST_CASE("a secret key file that everyone may read is refused, a group-readable one is not") {
  TempDir dir;
  const std::string k = "HelloWorldHelloWorldHelloWorldHelloWorld";
  auto f = dir.write("s.key", k + "\n");
  ::chmod(f.c_str(), 0644);
  CHECK(errorOf([&] { readSecretKeyFile(f); }) ==
        f + ": the secret key file is readable by everyone; chmod 600 it");
  ::chmod(f.c_str(), 0640);
  CHECK(readSecretKeyFile(f) == k);
}
