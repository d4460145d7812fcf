#include "common/transport/zmtp_scanner.hpp"

#include <algorithm>
#include <boost/algorithm/string/predicate.hpp>
#include <cstring>
#include <locale>
#include <string_view>

#include "common/util/printable.hpp"

namespace tern::transport {

namespace {

constexpr uint8_t kMore = 0x01;
constexpr uint8_t kLong = 0x02;
constexpr uint8_t kCommand = 0x04;
constexpr size_t kGreetingBytes = 64;
constexpr size_t kMechanismAt = 12;
constexpr size_t kMechanismBytes = 20;

// The socket types libzmq lets a ROUTER talk to; it closes any other peer without an event.
bool routerTakes(std::string_view type) {
  return type == "DEALER" || type == "REQ" || type == "ROUTER";
}
// A READY carries the socket type and a routing id of at most 255 bytes, and any metadata the
// peer adds: 4 KiB is far more than a ZeroMQ peer sends.
constexpr uint64_t kMaxFirstCommandBytes = 4096;

// The big-endian 32-bit value at p.
uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

}  // namespace

bool ZmtpScanner::feed(std::span<const uint8_t> bytes) {
  size_t i = 0;
  while (!refused() && i < bytes.size()) {
    switch (state_) {
      case State::kGreeting:
        i += takeGreeting(bytes.subspan(i));
        break;
      case State::kFlags:
        takeFlags(bytes[i++]);
        break;
      case State::kSize:
        size_ = (size_ << 8) | bytes[i++];
        if (++have_ == size_width_) sizeDone();
        break;
      case State::kBody: {
        const uint64_t n = std::min<uint64_t>(body_left_, bytes.size() - i);
        if (command_ && !first_command_done_) takeCommandBytes(bytes.subspan(i, size_t(n)));
        i += size_t(n);
        body_left_ -= n;
        if (body_left_ == 0) state_ = State::kFlags;
        if (body_left_ == 0 && command_ && !first_command_done_) checkReady();
        break;
      }
    }
  }
  return !refused();
}

void ZmtpScanner::passBody(uint64_t n) {
  n = std::min(n, bodyLeft());
  body_left_ -= n;
  if (state_ == State::kBody && body_left_ == 0) state_ = State::kFlags;
}

// Collects the 64-byte greeting; checks it as soon as the signature and version are in, and again
// (the mechanism) once it is whole.
size_t ZmtpScanner::takeGreeting(std::span<const uint8_t> bytes) {
  const size_t n = std::min(kGreetingBytes - have_, bytes.size());
  std::memcpy(greeting_ + have_, bytes.data(), n);
  have_ += n;
  if (!checkGreeting()) return n;
  if (have_ == kGreetingBytes) {
    have_ = 0;
    state_ = State::kFlags;
  }
  return n;
}

bool ZmtpScanner::checkGreeting() {
  if (have_ >= 1 && greeting_[0] != 0xFF) {
    refuse("not_zmtp3_null: no ZMTP signature (ZMTP 1.0 or not ZeroMQ)");
  } else if (have_ >= 10 && greeting_[9] != 0x7F) {
    refuse("not_zmtp3_null: no ZMTP signature");
  } else if (have_ >= 11 && greeting_[10] < 3) {
    refuse("not_zmtp3_null: ZMTP version " + std::to_string(greeting_[10]) + " (3 needed)");
  } else if (have_ == kGreetingBytes) {
    static const uint8_t kNull[kMechanismBytes] = {'N', 'U', 'L', 'L'};
    if (std::memcmp(greeting_ + kMechanismAt, kNull, kMechanismBytes) != 0) {
      refuse("not_zmtp3_null: a security mechanism other than NULL");
    }
  }
  return !refused();
}

bool ZmtpScanner::takeFlags(uint8_t flags) {
  if ((flags & ~(kMore | kLong | kCommand)) != 0) {
    refuse("not_zmtp3_null: reserved frame flag bits set");
    return false;
  }
  command_ = (flags & kCommand) != 0;
  // libzmq reads the first frame after the greeting as the handshake's command whatever its
  // flags: one sent as a message frame would carry a READY past the check below.
  if (!command_ && !first_command_done_) {
    refuse("not_zmtp3_null: the first frame after the greeting is not a command");
    return false;
  }
  if (command_ && (flags & kMore)) {
    refuse("not_zmtp3_null: a command frame with the more flag");
    return false;
  }
  if (!command_) {
    more_ = (flags & kMore) != 0;
    if (++frames_in_message_ > limits_.max_frames_per_message) {
      refuse("too_many_frames: more than " + std::to_string(limits_.max_frames_per_message) +
             " frames in one message");
      return false;
    }
  }
  size_width_ = (flags & kLong) ? 8 : 1;
  size_ = 0;
  have_ = 0;
  state_ = State::kSize;
  return true;
}

bool ZmtpScanner::sizeDone() {
  if (command_ && !first_command_done_ && size_ > kMaxFirstCommandBytes) {
    refuse("not_zmtp3_null: a first command of " + std::to_string(size_) + " bytes (limit " +
           std::to_string(kMaxFirstCommandBytes) + ")");
    return false;
  }
  if (size_ > limits_.max_frame_bytes) {
    refuse("frame_too_large: a frame of " + std::to_string(size_) + " bytes (limit " +
           std::to_string(limits_.max_frame_bytes) + ")");
    return false;
  }
  if (!command_) {
    message_bytes_ += size_;
    if (message_bytes_ > limits_.max_message_bytes) {
      refuse("message_too_large: over " + std::to_string(limits_.max_message_bytes) +
             " bytes in one message");
      return false;
    }
  }
  if (!command_ && !more_) {
    ++messages_;
    frames_in_message_ = 0;
    message_bytes_ = 0;
  }
  body_left_ = size_;
  state_ = size_ == 0 ? State::kFlags : State::kBody;
  if (size_ == 0 && command_ && !first_command_done_) checkReady();
  return true;
}

void ZmtpScanner::takeCommandBytes(std::span<const uint8_t> bytes) {
  first_command_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// The first command under NULL is the peer's READY: its properties are read for a routing id
// (Identity) starting with a zero byte. What is not a READY, or does not parse, libzmq refuses.
void ZmtpScanner::checkReady() {
  first_command_done_ = true;
  std::string body;
  body.swap(first_command_);  // the scanner keeps none of it
  const auto* p = reinterpret_cast<const uint8_t*>(body.data());
  const size_t n = body.size();
  if (n < 1 || n < size_t(1) + p[0] || body.compare(1, p[0], "READY") != 0) return;
  for (size_t at = 1 + p[0]; at < n;) {
    const size_t name_len = p[at];
    if (at + 1 + name_len + 4 > n) return;
    const std::string_view name(body.data() + at + 1, name_len);
    const uint32_t value_len = be32(p + at + 1 + name_len);
    const size_t value_at = at + 1 + name_len + 4;
    if (value_len > n - value_at) return;
    if (boost::algorithm::iequals(name, "Identity", std::locale::classic()) && value_len > 0 &&
        p[value_at] == 0) {
      refuse("reserved_identity: a routing id starting with a zero byte, which libzmq reserves");
      return;
    }
    const std::string_view value(body.data() + value_at, value_len);
    if (boost::algorithm::iequals(name, "Socket-Type", std::locale::classic()) &&
        !routerTakes(value)) {
      refuse("bad_socket_type: a " + printable(value, 32) +
             " socket, which a ROUTER does not take (DEALER, REQ or ROUTER)");
      return;
    }
    at = value_at + value_len;
  }
}

}  // namespace tern::transport
