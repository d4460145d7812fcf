// tern-barrage: sends a bounded barrage of malformed and hostile messages to a coordinator over
// loopback and accounts for every one of them. Each message that reaches the coordinator's
// protocol core must be answered with exactly one wire::Error (that is how the core refuses
// input), so the tool waits for one error reply per message and counts them by code. Frames over
// the coordinator's max_message_bytes never reach the core: libzmq refuses them before
// allocating, which the sender observes as its connection being dropped. The tool never sends a
// well-formed Join, so it can never become a member and cannot influence training.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/compression/compressor.hpp"
#include "message.hpp"

using namespace tern;
using Bytes = std::string;

namespace {

enum class Kind {
  kRandomBytes,
  kTruncated,
  kMutated,
  kTooManyFrames,
  kOversizedPayload,  // large but under the transport limit: refused by the core
  kWrongVersion,
  kNanPayload,
  kForeignSession,
  kUnexpectedType,
  kBadJoin,
  kOversizedFrame,  // over max_message_bytes: refused by libzmq, the connection is dropped
};
constexpr int kKinds = 11;
const char* kindName(Kind k) {
  static const char* names[] = {"random_bytes",    "truncated",         "mutated",
                                "too_many_frames", "oversized_payload", "wrong_version",
                                "nan_payload",     "foreign_session",   "unexpected_type",
                                "bad_join",        "oversized_frame"};
  return names[int(k)];
}

struct Generator {
  std::mt19937_64 rng;
  uint32_t dim;
  size_t max_message_bytes;

  uint64_t u64() { return rng(); }
  size_t below(size_t n) { return n ? size_t(rng() % n) : 0; }
  Bytes randomBytes(size_t n) {
    Bytes b(n, '\0');
    for (auto& c : b) c = char(rng());
    return b;
  }

  Bytes gradient(bool with_nan) {
    std::vector<float> g(dim);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (auto& x : g) x = n(rng);
    size_t marked = below(dim);
    g[marked] = 1234.5f;
    Rng r(u64());
    auto bytes = compression::makeCompressor({"identity"})->compress(g, 0, r).bytes;
    if (with_nan) {
      // The compressors refuse to produce NaN; patch it into valid wire bytes instead.
      const float mark = 1234.5f, nan = std::numeric_limits<float>::quiet_NaN();
      for (size_t i = 0; i + 4 <= bytes.size(); ++i) {
        if (std::memcmp(&bytes[i], &mark, 4) == 0) std::memcpy(&bytes[i], &nan, 4);
      }
    }
    return Bytes(bytes.begin(), bytes.end());
  }

  // A well-formed envelope of a message a worker may send (never a Join: see validJoin).
  wire::Envelope plausible() {
    wire::Envelope e = makeEnvelope();
    switch (below(3)) {
      case 0: {
        auto* p = e.mutable_push();
        p->set_round(below(100));
        p->set_session(u64());
        p->set_worker_id(uint32_t(below(8)));
        p->set_local_loss(0.5);
        p->set_level(uint32_t(below(dim)));
        break;
      }
      case 1:
        e.mutable_heartbeat()->set_session(u64());
        e.mutable_heartbeat()->set_worker_id(uint32_t(below(8)));
        break;
      default:
        e.mutable_leave()->set_session(u64());
        e.mutable_leave()->set_worker_id(uint32_t(below(8)));
        e.mutable_leave()->set_reason("barrage");
        break;
    }
    return e;
  }

  // What the coordinator would accept as a join: the one thing the barrage must not send.
  static bool validJoin(const std::vector<Bytes>& frames) {
    if (frames.empty() || frames.size() > 2) return false;
    wire::Envelope e;
    if (!e.ParseFromString(frames[0])) return false;
    if (e.version() != wire::PROTOCOL_VERSION || !e.has_join()) return false;
    if (frames.size() == 2 && !frames[1].empty()) return false;
    return e.join().sample_count() > 0 && !e.join().worker_name().empty() &&
           e.join().worker_name().size() <= 256;
  }

  std::vector<Bytes> make(Kind k) {
    while (true) {
      auto f = makeOnce(k);
      if (!validJoin(f)) return f;
    }
  }

  std::vector<Bytes> makeOnce(Kind k) {
    switch (k) {
      case Kind::kRandomBytes: {
        std::vector<Bytes> f{randomBytes(below(600))};
        if (below(3) == 0) f.push_back(randomBytes(below(4000)));
        return f;
      }
      case Kind::kTruncated: {
        Bytes env = plausible().SerializeAsString();
        Bytes pay = gradient(false);
        if (below(2) == 0) {
          env.resize(below(env.size()));
          return {env, pay};
        }
        pay.resize(below(pay.size()));
        return {env, pay};
      }
      case Kind::kMutated: {
        std::vector<Bytes> f{plausible().SerializeAsString(), gradient(false)};
        Bytes& target = f[below(2)];
        for (size_t i = 0, n = 1 + below(8); i < n && !target.empty(); ++i) {
          target[below(target.size())] ^= char(1 + below(255));
        }
        return f;
      }
      case Kind::kTooManyFrames: {
        std::vector<Bytes> f{plausible().SerializeAsString()};
        for (size_t i = 0, n = 2 + below(4); i < n; ++i) f.push_back(randomBytes(below(64)));
        return f;
      }
      case Kind::kOversizedPayload: {
        wire::Envelope e = plausible();
        return {e.SerializeAsString(),
                randomBytes(std::min(max_message_bytes - 64, size_t(dim) * 8))};
      }
      case Kind::kWrongVersion: {
        wire::Envelope e = plausible();
        static const uint32_t versions[] = {0, 2, 3, 99, 0xffffffffu};
        e.set_version(versions[below(5)]);
        return {e.SerializeAsString(), e.has_push() ? gradient(false) : Bytes()};
      }
      case Kind::kNanPayload: {
        wire::Envelope e = makeEnvelope();
        e.mutable_push()->set_session(u64());
        e.mutable_push()->set_round(below(100));
        if (below(2)) e.mutable_push()->set_local_loss(std::numeric_limits<double>::quiet_NaN());
        return {e.SerializeAsString(), gradient(true)};
      }
      case Kind::kForeignSession: {
        wire::Envelope e = plausible();
        return {e.SerializeAsString(), e.has_push() ? gradient(false) : Bytes()};
      }
      case Kind::kUnexpectedType: {
        wire::Envelope e = makeEnvelope();
        switch (below(5)) {
          case 0:
            e.mutable_welcome()->set_worker_id(1);
            break;
          case 1:
            e.mutable_round_start()->set_round(below(100));
            break;
          case 2:
            e.mutable_ack()->set_round(below(100));
            break;
          case 3:
            e.mutable_error()->set_text("barrage");
            break;
          default:
            break;  // no body at all
        }
        return {e.SerializeAsString()};
      }
      case Kind::kBadJoin: {
        wire::Envelope e = makeEnvelope();
        auto* j = e.mutable_join();
        switch (below(4)) {
          case 0:
            j->set_worker_name("intruder");
            break;  // zero samples
          case 1:
            j->set_sample_count(100);
            break;  // no name
          case 2:
            j->set_worker_name(Bytes(300, 'x'));
            j->set_sample_count(1);
            break;
          default:  // a payload
            j->set_worker_name("intruder");
            j->set_sample_count(100);
            return {e.SerializeAsString(), randomBytes(1 + below(100))};
        }
        return {e.SerializeAsString()};
      }
      case Kind::kOversizedFrame:
        return {randomBytes(max_message_bytes + 1 + below(1024))};
    }
    return {};
  }
};

bool sendFrames(zmq::socket_t& s, const std::vector<Bytes>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    if (!s.send(zmq::buffer(frames[i]), flags)) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tern-barrage: malformed-message barrage against a tern coordinator (loopback tests)"};
  std::string endpoint;
  uint64_t count = 10000, seed = 1;
  uint32_t dim = 7850, sockets = 4, window = 64;
  size_t max_message_bytes = 1 << 20;
  double timeout_s = 120.0;
  app.add_option("--endpoint", endpoint, "coordinator endpoint (tcp://127.0.0.1:PORT)")->required();
  app.add_option("--count", count, "messages to send");
  app.add_option("--seed", seed, "random seed");
  app.add_option("--dim", dim, "model parameters (sizes the gradients)");
  app.add_option("--sockets", sockets, "connections the barrage is spread over")
      ->check(CLI::Range(1, 64));
  app.add_option("--window", window, "unanswered messages allowed per connection");
  app.add_option("--max-message-bytes", max_message_bytes, "the coordinator's max_message_bytes");
  app.add_option("--timeout", timeout_s, "give up waiting for replies after this many seconds");
  CLI11_PARSE(app, argc, argv);
  if (endpoint.rfind("tcp://127.", 0) != 0 && endpoint.rfind("tcp://localhost", 0) != 0) {
    std::cerr << "tern-barrage: loopback endpoints only\n";
    return 2;
  }

  zmq::context_t ctx(1);
  std::vector<zmq::socket_t> socks;
  for (uint32_t i = 0; i < sockets; ++i) {
    socks.emplace_back(ctx, zmq::socket_type::dealer);
    socks.back().set(zmq::sockopt::linger, 1000);
    socks.back().set(zmq::sockopt::rcvhwm, 100000);
    socks.back().connect(endpoint);
  }
  Generator gen{std::mt19937_64(seed), dim, max_message_bytes};
  std::map<std::string, uint64_t> sent, replies;
  std::vector<uint64_t> outstanding(sockets, 0);
  uint64_t to_core = 0, answered = 0, oversized = 0, oversized_dropped = 0;

  auto drain = [&](int timeout_ms) {
    std::vector<zmq::pollitem_t> items;
    for (auto& s : socks) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout_ms));
    for (size_t i = 0; i < socks.size(); ++i) {
      zmq::message_t part;
      while (socks[i].recv(part, zmq::recv_flags::dontwait)) {
        std::vector<zmq::message_t> parts;
        parts.push_back(std::move(part));
        while (parts.back().more()) {
          zmq::message_t next;
          (void)socks[i].recv(next);
          parts.push_back(std::move(next));
        }
        wire::Envelope e;
        std::string code = "unparseable_reply";
        if (e.ParseFromArray(parts[0].data(), int(parts[0].size()))) {
          code = e.has_error() ? wire::Error::Code_Name(e.error().code()) : "not_an_error";
        }
        ++replies[code];
        ++answered;
        if (outstanding[i]) --outstanding[i];
      }
    }
  };

  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t n = 0; n < count; ++n) {
    // Every hundredth message is a frame over the transport limit, on a connection of its own.
    Kind k = n % 100 == 99 ? Kind::kOversizedFrame : Kind(n % (kKinds - 1));
    auto frames = gen.make(k);
    ++sent[kindName(k)];
    if (k == Kind::kOversizedFrame) {
      zmq::socket_t s(ctx, zmq::socket_type::dealer);
      s.set(zmq::sockopt::linger, 1000);
      std::string mon = "inproc://barrage-monitor-" + std::to_string(n);
      zmq_socket_monitor(s.handle(), mon.c_str(), ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED);
      zmq::socket_t m(ctx, zmq::socket_type::pair);
      m.connect(mon);
      s.connect(endpoint);
      sendFrames(s, frames);
      ++oversized;
      // The coordinator must close this connection instead of buffering the frame.
      bool dropped = false;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!dropped && std::chrono::steady_clock::now() < until) {
        zmq::pollitem_t it{m.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&it, 1, std::chrono::milliseconds(100));
        zmq::message_t ev;
        while (m.recv(ev, zmq::recv_flags::dontwait)) {
          uint16_t event;
          std::memcpy(&event, ev.data(), sizeof event);
          if (event == ZMQ_EVENT_DISCONNECTED) dropped = true;
          zmq::message_t addr;
          (void)m.recv(addr);
        }
      }
      oversized_dropped += dropped ? 1 : 0;
      zmq_socket_monitor(s.handle(), nullptr, 0);
      continue;
    }
    size_t i = n % socks.size();
    while (outstanding[i] >= window) drain(100);
    if (!sendFrames(socks[i], frames)) {
      std::cerr << "tern-barrage: send failed\n";
      return 1;
    }
    ++outstanding[i];
    ++to_core;
    drain(0);
  }
  while (answered < to_core &&
         std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(timeout_s)) {
    drain(100);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::cout << "barrage: sent=" << count << " to_core=" << to_core << " answered=" << answered
            << " oversized=" << oversized << " oversized_dropped=" << oversized_dropped
            << " seconds=" << secs << '\n';
  std::cout << "barrage sent:";
  for (const auto& [k, v] : sent) std::cout << ' ' << k << '=' << v;
  std::cout << "\nbarrage replies:";
  for (const auto& [k, v] : replies) std::cout << ' ' << k << '=' << v;
  std::cout << std::endl;
  return answered == to_core && oversized_dropped == oversized ? 0 : 1;
}
