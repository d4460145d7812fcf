// tern-frame-flood: sends a coordinator one multipart message of many empty frames (2 bytes each
// on the wire) and then one heartbeat of an unknown session, and waits for the coordinator's two
// refusals: the flood's (malformed: bad frame count) and the heartbeat's (unknown session). Both
// answered means the coordinator read past the flood and kept serving. Exit 0 then, 1 otherwise.
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <string>
#include <zmq.hpp>

#include "message.hpp"

using namespace tern;

int main(int argc, char** argv) {
  std::string endpoint;
  size_t frames = 4u << 20;
  double timeout_s = 60.0;
  CLI::App app{"Send one message of many empty frames to a coordinator and wait for its answer"};
  app.add_option("--endpoint", endpoint, "coordinator endpoint (tcp://127.0.0.1:PORT)")->required();
  app.add_option("--frames", frames, "empty frames in the one message");
  app.add_option("--timeout", timeout_s, "give up waiting for the answers after this many seconds");
  CLI11_PARSE(app, argc, argv);

  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 200);
  s.connect(endpoint);
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i + 1 < frames; ++i)
    s.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore);
  s.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::none);
  Message hb;
  hb.envelope = makeEnvelope();
  hb.envelope.mutable_heartbeat()->set_session(0xdeadbeef);
  s.send(zmq::buffer(hb.envelope.SerializeAsString()), zmq::send_flags::none);

  bool flood_refused = false, heartbeat_refused = false;
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  while (!(flood_refused && heartbeat_refused) && std::chrono::steady_clock::now() < deadline) {
    zmq::message_t reply;
    if (!s.recv(reply)) continue;
    wire::Envelope e;
    if (!e.ParseFromArray(reply.data(), int(reply.size())) || !e.has_error()) continue;
    if (e.error().code() == wire::Error::MALFORMED &&
        e.error().text().find("bad_frame_count") != std::string::npos) {
      flood_refused = true;
    } else if (e.error().code() == wire::Error::UNKNOWN_SESSION) {
      heartbeat_refused = true;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "frame-flood: frames=" << frames << " flood_refused=" << flood_refused
            << " heartbeat_refused=" << heartbeat_refused << " seconds=" << seconds << "\n";
  return flood_refused && heartbeat_refused ? 0 : 1;
}
