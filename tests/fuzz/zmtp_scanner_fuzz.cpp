// libFuzzer target: the frame guard's ZMTP scanner on arbitrary bytes, fed whole and in pieces as
// a socket would deliver them. Beyond "no crash, no UB": both ways give the same verdict and the
// same count of whole messages, a refusal carries one of the documented reasons, and no
// more than the limit's frames of one message ever pass.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/transport/zmtp_scanner.hpp"

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

using tern::transport::ZmtpLimits;
using tern::transport::ZmtpScanner;

bool documented(const std::string& reason) {
  for (const char* r : {"too_many_frames:", "frame_too_large:", "message_too_large:",
                        "not_zmtp3_null:", "reserved_identity:", "bad_socket_type:"}) {
    if (reason.rfind(r, 0) == 0) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t piece = 1 + data[0] % 64;  // the first byte sets the read size
  ZmtpLimits limits;
  limits.max_frames_per_message = 1 + data[1] % 8;
  limits.max_frame_bytes = 4096;
  limits.max_message_bytes = 6000;
  const std::span<const uint8_t> bytes(data + 2, size - 2);
  ZmtpScanner whole(limits);
  ZmtpScanner pieces(limits);
  whole.feed(bytes);
  for (size_t at = 0; at < bytes.size(); at += piece) {
    pieces.feed(bytes.subspan(at, std::min(piece, bytes.size() - at)));
  }
  require(whole.refused() == pieces.refused());
  require(whole.reason() == pieces.reason());
  require(whole.messages() == pieces.messages());
  if (whole.refused()) require(documented(whole.reason()));
  // A message of more frames than the limit can never be counted as passed: each needs at least
  // two bytes a frame, after the 64-byte greeting.
  require(whole.messages() <= (bytes.size() > 64 ? (bytes.size() - 64) / 2 : 0));
  return 0;
}
