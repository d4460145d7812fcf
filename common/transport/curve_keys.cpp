#include "common/transport/curve_keys.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

namespace tern::transport {
namespace {

constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
// Far larger than any key file; a bigger file is a mistake (a dataset, a binary), not a key.
constexpr std::uintmax_t kMaxKeyFileBytes = 64 * 1024;

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

std::string systemError(const std::string& path, const std::string& doing) {
  return path + ": cannot " + doing + ": " + std::strerror(errno);
}

// Creates `path` exclusively with `mode` and writes `text`; false when it already exists.
bool createExclusive(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw KeyFileError(systemError(path, "create"));
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto msg = systemError(path, "write");
      ::close(fd);
      ::unlink(path.c_str());
      throw KeyFileError(msg);
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    auto msg = systemError(path, "write");
    ::unlink(path.c_str());
    throw KeyFileError(msg);
  }
  return true;
}

// Writes `path` whole with `mode`: a fresh temporary file in the same directory, renamed over.
void replaceFile(const std::string& path, const std::string& text, mode_t mode) {
  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (!createExclusive(tmp, text, mode)) throw KeyFileError(tmp + ": cannot create");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto msg = systemError(path, "replace");
    ::unlink(tmp.c_str());
    throw KeyFileError(msg);
  }
}

void writeKeyFile(const std::string& path, const std::string& text, mode_t mode, bool force) {
  if (force) {
    replaceFile(path, text, mode);
  } else if (!createExclusive(path, text, mode)) {
    throw KeyFileError(path + ": already exists (use --force to replace it)");
  }
}

}  // namespace

bool curveAvailable() { return zmq_has("curve") != 0; }

CurveKeyPair generateCurveKeyPair() {
  char pub[kCurveKeyZ85Chars + 1] = {};
  char sec[kCurveKeyZ85Chars + 1] = {};
  if (!curveAvailable() || zmq_curve_keypair(pub, sec) != 0) {
    throw std::runtime_error("this libzmq has no CURVE support (it must be built with libsodium)");
  }
  CurveKeyPair keys{pub, sec};
  std::memset(sec, 0, sizeof sec);
  return keys;
}

std::string curvePublicKeyOf(const std::string& secret_z85) {
  if (!isZ85Key(secret_z85)) throw std::invalid_argument("not a Z85 CURVE key");
  char pub[kCurveKeyZ85Chars + 1] = {};
  if (zmq_curve_public(pub, secret_z85.c_str()) != 0) {
    throw std::runtime_error("this libzmq has no CURVE support (it must be built with libsodium)");
  }
  return pub;
}

bool isZ85Key(std::string_view text) {
  if (text.size() != kCurveKeyZ85Chars) return false;
  for (char c : text) {
    if (kZ85Alphabet.find(c) == std::string_view::npos) return false;
  }
  // Every group of 5 characters must also fit in 32 bits; libzmq's decoder checks that.
  uint8_t bytes[kCurveKeyBytes];
  const std::string z(text);
  return zmq_z85_decode(bytes, z.c_str()) != nullptr;
}

std::array<uint8_t, kCurveKeyBytes> decodeZ85Key(std::string_view text) {
  std::array<uint8_t, kCurveKeyBytes> bytes{};
  const std::string z(text);
  if (text.size() != kCurveKeyZ85Chars || !zmq_z85_decode(bytes.data(), z.c_str())) {
    throw std::invalid_argument("not a Z85 CURVE key");
  }
  return bytes;
}

std::string encodeZ85Key(const uint8_t* bytes) {
  char z[kCurveKeyZ85Chars + 1] = {};
  zmq_z85_encode(z, bytes, kCurveKeyBytes);
  return z;
}

std::vector<KeyLine> parseKeyText(const std::string& text, const std::string& file) {
  std::vector<KeyLine> keys;
  std::istringstream in(text);
  std::string raw;
  size_t number = 0;
  while (std::getline(in, raw)) {
    ++number;
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    const auto word_end = line.find_first_of(" \t");
    const std::string_view word = line.substr(0, word_end);
    if (isZ85Key(word)) {
      std::string label(word_end == std::string_view::npos ? "" : trim(line.substr(word_end)));
      keys.push_back({std::string(word), std::move(label), number});
    } else if (line.front() != '#') {
      // The word itself is not echoed: in a secret key file it would be (part of) the secret.
      throw KeyFileError(file + ":" + std::to_string(number) +
                         ": not a CURVE key: expected 40 Z85 characters, found a word of " +
                         std::to_string(word.size()) + " characters");
    }
  }
  return keys;
}

std::vector<KeyLine> readKeyLines(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw KeyFileError(path + ": " + what + " not found");
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw KeyFileError(path + ": " + what + " is not a regular file");
  }
  if (std::filesystem::file_size(path, ec) > kMaxKeyFileBytes) {
    throw KeyFileError(path + ": too large to be a " + what);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw KeyFileError(systemError(path, "read the " + what));
  std::stringstream text;
  text << in.rdbuf();
  return parseKeyText(text.str(), path);
}

std::string readKeyFile(const std::string& path, const std::string& what) {
  auto keys = readKeyLines(path, what);
  if (keys.empty()) {
    throw KeyFileError(path + ": no CURVE key in the " + what +
                       " (expected a line of 40 Z85 characters)");
  }
  if (keys.size() > 1) {
    throw KeyFileError(path + ":" + std::to_string(keys[1].line) + ": the " + what +
                       " must hold one key, found another one here");
  }
  return keys.front().key;
}

bool worldReadable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0;
}

std::string readSecretKeyFile(const std::string& path) {
  if (!curveAvailable()) {
    throw std::runtime_error("CURVE keys are configured but this libzmq has no CURVE support");
  }
  std::string key = readKeyFile(path, "secret key file");
  if (worldReadable(path)) {
    throw KeyFileError(path + ": the secret key file is readable by everyone; chmod 600 it");
  }
  return key;
}

WrittenKeyPair writeKeyPair(const std::string& base, const CurveKeyPair& keys, bool force) {
  if (!isZ85Key(keys.public_key) || !isZ85Key(keys.secret_key)) {
    throw std::invalid_argument("writeKeyPair: not a Z85 key pair");
  }
  WrittenKeyPair w{base + ".pub", base + ".key", keys.public_key};
  const std::string name = std::filesystem::path(base).filename().string();
  if (name.empty()) throw KeyFileError(base + ": --out needs a file name, e.g. DIR/NAME");
  if (!force) {
    // Check both before writing either: a refused keygen leaves nothing half-written.
    for (const auto& f : {w.public_file, w.secret_file}) {
      std::error_code ec;
      if (std::filesystem::symlink_status(f, ec).type() != std::filesystem::file_type::not_found) {
        throw KeyFileError(f + ": already exists (use --force to replace it)");
      }
    }
  }
  // The secret first: a public key without its secret is useless, the reverse is recoverable.
  writeKeyFile(w.secret_file,
               "# tern CURVE secret key of '" + name +
                   "'. Keep it private: whoever holds it can act as this node.\n" +
                   keys.secret_key + "\n",
               0600, force);
  // The public line carries the name as its label, so .pub files concatenate into an allowlist.
  writeKeyFile(w.public_file,
               "# tern CURVE public key of '" + name + "'.\n" + keys.public_key + " " + name + "\n",
               0644, force);
  return w;
}

int runKeygenCommand(const std::string& base, bool force, std::ostream& out, std::ostream& err) {
  try {
    auto written = writeKeyPair(base, generateCurveKeyPair(), force);
    out << "public key " << written.public_key << "\n"
        << "wrote " << written.public_file << " (public) and " << written.secret_file
        << " (secret, mode 0600)\n";
    return 0;
  } catch (const std::exception& e) {
    err << "keygen: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace tern::transport
