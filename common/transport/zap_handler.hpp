#pragma once
// The coordinator's gatekeeper for CURVE connections: a ZAP handler (ZeroMQ RFC 27) that libzmq
// asks, over inproc://zeromq.zap.01, whether a client that completed the CURVE handshake may
// connect. It admits exactly the public keys on the allowlist. The daemon polls its socket in
// its own event loop; the decision itself is a pure function of the request and the allowlist.
#include <cstdint>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/transport/allowlist.hpp"

namespace tern::transport {

struct ZapVerdict {
  bool admitted = false;
  std::string public_key;  // Z85, empty when the request was not a CURVE one
  std::string label;       // the allowlist's name for the key, when admitted
  std::string address;     // the client's IP address as libzmq reports it
  std::string reason;      // why it was refused
};

// Answers one ZAP request (frames: version, request id, domain, address, identity, mechanism,
// credentials...) with the reply frames (version, request id, status code, status text,
// user id, metadata) and says what was decided.
std::vector<std::string> answerZapRequest(const std::vector<std::string>& request,
                                          const Allowlist& allowlist, ZapVerdict& verdict);

class ZapHandler {
 public:
  // Binds the handler's endpoint in `ctx`; the CURVE server socket must use the same context.
  ZapHandler(zmq::context_t& ctx, Allowlist allowlist);
  // Answers every pending request without blocking; returns the decisions made.
  std::vector<ZapVerdict> serve();
  void replaceAllowlist(Allowlist allowlist) { allowlist_ = std::move(allowlist); }
  const Allowlist& allowlist() const { return allowlist_; }
  zmq::socket_t& socket() { return socket_; }
  uint64_t admitted() const { return admitted_; }
  uint64_t refused() const { return refused_; }

 private:
  zmq::socket_t socket_;
  Allowlist allowlist_;
  uint64_t admitted_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace tern::transport
