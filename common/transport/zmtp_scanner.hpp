#pragma once
// Reads the bytes a peer sends to a ZMTP 3.x server (the greeting, then command and message
// frames) without keeping any of them, and says when the stream breaks a limit: more frames in
// one message than a tern message can have, a frame larger than the channel takes, or anything
// that is not ZMTP 3 with the NULL mechanism. The frame guard (frame_guard.hpp) runs one per
// connection and drops the connection at the first refusal, before libzmq would buffer the rest
// of an endless multipart message (docs/security.md, "What one peer can make the coordinator
// hold"). Framing as in the ZMTP 3.0 specification (rfc.zeromq.org/spec/23).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tern::transport {

struct ZmtpLimits {
  size_t max_frames_per_message = 16;  // message frames up to and including the last
  uint64_t max_frame_bytes = 64u << 20;
  // All frames of one message together (a tern message: an envelope and a payload).
  uint64_t max_message_bytes = (64u << 20) + (1u << 20);
};

class ZmtpScanner {
 public:
  explicit ZmtpScanner(const ZmtpLimits& limits) : limits_(limits) {}
  // Takes the next bytes of the stream; false once it is refused (then for good: see reason()).
  bool feed(std::span<const uint8_t> bytes);
  bool refused() const { return !reason_.empty(); }
  // Why the stream was refused: "too_many_frames", "frame_too_large", "message_too_large",
  // "reserved_identity" (a READY naming a routing id that starts with a zero byte, the form libzmq
  // gives its peers: claiming one could collide with a generated id, which aborts libzmq, or take
  // over a gone peer's), "bad_socket_type" (a READY naming a socket type a ROUTER does not take,
  // which libzmq would close uncounted) or "not_zmtp3_null", with detail after a colon; empty
  // while it is fine.
  const std::string& reason() const { return reason_; }
  uint64_t messages() const { return messages_; }  // whole messages seen so far
  // Bytes of the current frame's body still to come (0 outside a body): they carry nothing the
  // scanner checks, so a relay may pass them on unseen and say so with passBody.
  uint64_t bodyLeft() const { return state_ == State::kBody ? body_left_ : 0; }
  // Counts `n` <= bodyLeft() body bytes passed on without being fed.
  void passBody(uint64_t n);

 private:
  enum class State { kGreeting, kFlags, kSize, kBody };
  size_t takeGreeting(std::span<const uint8_t> bytes);
  bool checkGreeting();
  bool takeFlags(uint8_t flags);
  bool sizeDone();
  void takeCommandBytes(std::span<const uint8_t> bytes);
  void checkReady();
  void refuse(const std::string& why) { reason_ = why; }

  ZmtpLimits limits_;
  State state_ = State::kGreeting;
  uint8_t greeting_[64] = {};
  size_t have_ = 0;        // greeting or size bytes collected so far
  size_t size_width_ = 0;  // 1 or 8
  uint64_t size_ = 0;      // the frame's size, big-endian as it arrives
  uint64_t body_left_ = 0;
  bool more_ = false;  // the current frame is not a message's last
  bool command_ = false;
  // The first command's body (the READY), collected to read its properties; at most
  // kMaxFirstCommandBytes, released once checked.
  std::string first_command_;
  bool first_command_done_ = false;
  size_t frames_in_message_ = 0;
  uint64_t message_bytes_ = 0;  // of the frames of the current message so far
  uint64_t messages_ = 0;
  std::string reason_;
};

}  // namespace tern::transport
