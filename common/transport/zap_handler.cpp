#include "common/transport/zap_handler.hpp"

#include "common/transport/channel.hpp"

namespace tern::transport {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kZapVersion = "1.0";
// A request has 6 frames before the mechanism's credentials; CURVE adds one (the client key).
constexpr size_t kCurveRequestFrames = 7;

std::vector<std::string> reply(const std::string& request_id, const std::string& code,
                               const std::string& text, const std::string& user_id) {
  return {kZapVersion, request_id, code, text, user_id, ""};
}

}  // namespace

std::vector<std::string> answerZapRequest(const std::vector<std::string>& request,
                                          const Allowlist& allowlist, ZapVerdict& verdict) {
  verdict = ZapVerdict{};
  const std::string request_id = request.size() > 1 ? request[1] : "";
  if (request.size() < 6 || request[0] != kZapVersion) {
    verdict.reason = "malformed ZAP request";
    return reply(request_id, "500", "malformed request", "");
  }
  verdict.address = request[3];
  if (request[5] != "CURVE" || request.size() != kCurveRequestFrames ||
      request[6].size() != kCurveKeyBytes) {
    verdict.reason = "not a CURVE client (" + request[5] + ")";
    return reply(request_id, "400", "CURVE required", "");
  }
  verdict.public_key = encodeZ85Key(reinterpret_cast<const uint8_t*>(request[6].data()));
  if (auto label = allowlist.find(verdict.public_key)) {
    verdict.admitted = true;
    verdict.label = *label;
    return reply(request_id, "200", "OK", verdict.public_key);
  }
  verdict.reason = "key not on the allowlist";
  return reply(request_id, "400", "key not allowed", "");
}

ZapHandler::ZapHandler(zmq::context_t& ctx, Allowlist allowlist)
    : socket_(ctx, zmq::socket_type::rep), allowlist_(std::move(allowlist)) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind(kZapEndpoint);
}

std::vector<ZapVerdict> ZapHandler::serve() {
  std::vector<ZapVerdict> verdicts;
  while (true) {
    std::vector<std::string> request;
    zmq::message_t part;
    if (!receiveFrame(socket_, part, zmq::recv_flags::dontwait)) break;
    request.push_back(part.to_string());
    while (part.more()) {  // the rest of a multipart message is there
      (void)receiveFrame(socket_, part, zmq::recv_flags::none);
      request.push_back(part.to_string());
    }
    ZapVerdict v;
    auto frames = answerZapRequest(request, allowlist_, v);
    for (size_t i = 0; i < frames.size(); ++i) {
      auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      zmq::message_t frame(frames[i].data(), frames[i].size());
      sendFrame(socket_, frame, flags);
    }
    ++(v.admitted ? admitted_ : refused_);
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

}  // namespace tern::transport
