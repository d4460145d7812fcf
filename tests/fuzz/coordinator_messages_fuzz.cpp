// libFuzzer target: the coordinator's whole input path as the daemon drives it — frames parsed by
// transport::parseFrames, then CoordinatorCore::onMessage / onMalformed / onTick — plus restoring
// from checkpoint bytes. The input is a script of operations so the fuzzer can reach deep states
// (joined workers, rounds closing, deadlines) and still send anything at all. Checked after every
// operation: no crash or UB, parameters stay finite, the round never goes back, and the model
// moves only when a round closes (a rejected message never touches it).
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/compression/compressor.hpp"
#include "common/transport/framing.hpp"
#include "tests/unit/cores/driven_coordinator.hpp"

using namespace tern;

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// Reads the fuzz input front to back; past the end it yields zeros and empty chunks.
struct Script {
  const uint8_t* p;
  const uint8_t* end;
  bool done() const { return p >= end; }
  uint8_t byte() { return p < end ? *p++ : 0; }
  std::string chunk() {
    size_t n = size_t(byte()) | (size_t(byte()) << 8);
    n = std::min(n, size_t(end - p));
    std::string s(reinterpret_cast<const char*>(p), n);
    p += n;
    return s;
  }
};

const std::string kPeers[] = {"A", "B", "Z"};

struct Fixture {
  double now = 0.0;
  config::CoordinatorSettings settings;
  std::unique_ptr<testing::DrivenCoordinator> core;
  uint64_t session = 0x5e55;
  uint32_t ids[2] = {0, 0};
  std::vector<uint8_t> valid_gradient;

  Fixture() {
    settings.min_workers = 2;
    settings.max_rounds = 30;
    settings.model.kind = "softmax";
    settings.model.features = 3;
    settings.model.classes = 2;
    settings.optimizer.momentum = 0.5;
    settings.allocation.budget.mean_ratio = 0.5;
    settings.round_deadline_seconds = 2.0;
    settings.worker_patience_seconds = 5.0;
    settings.max_message_bytes = 1 << 16;
    settings.checkpoint.every = 2;
    core = std::make_unique<testing::DrivenCoordinator>(settings, ml::makeModel(settings.model),
                                                        nullptr, session, [this] { return now; });
    const char* names[] = {"a", "b"};
    for (int i = 0; i < 2; ++i) {
      Message j;
      j.envelope = makeEnvelope();
      j.envelope.mutable_join()->set_worker_name(names[i]);
      j.envelope.mutable_join()->set_sample_count(100 * (i + 1));
      for (const auto& o : core->onMessage(kPeers[i], j, 10, now)) {
        if (o.message.envelope.has_welcome()) ids[i] = o.message.envelope.welcome().worker_id();
      }
    }
    std::vector<float> g(core->parameters().size(), 0.25f);
    Rng rng(1);
    valid_gradient = compression::makeCompressor({"identity"})->compress(g, 0, rng).bytes;
  }
};

void checkOutgoing(const std::vector<Outgoing>& out) {
  for (const auto& o : out) {
    require(o.message.envelope.version() == wire::PROTOCOL_VERSION);
    require(!o.peer.empty());
  }
}

void checkRestored(const std::string& bytes, Fixture& f) {
  try {
    auto r = testing::DrivenCoordinator::restore(
        f.settings, ml::makeModel(f.settings.model), nullptr, f.session + 1, [&f] { return f.now; },
        bytes);
    require(r->parameters().size() == f.core->parameters().size());
    // A checkpoint at or past max_rounds restores finished: nothing past the limit is trained.
    require(r->round() < f.settings.max_rounds || r->finished());
    for (float x : r->parameters()) require(std::isfinite(x));
    require(r->aliveWorkers() == 0);
    // Whatever was restored must serialize again.
    (void)r->checkpoint();
  } catch (const std::runtime_error&) {
    // Refusing damaged bytes is the correct outcome.
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture f;
  Script s{data, data + size};
  for (int steps = 0; !s.done() && steps < 64; ++steps) {
    const uint8_t op = s.byte();
    const std::string& peer = kPeers[(op >> 4) % 3];
    const uint32_t peer_id = f.ids[(op >> 4) % 2];
    const auto params_before = f.core->parameters();
    const uint64_t round_before = f.core->round();
    const uint64_t rejected_before = f.core->rejectedTotal();
    const bool finished_before = f.core->finished();
    const size_t unacked_before = f.core->finishUnacknowledged();
    std::vector<Outgoing> out;
    switch (op % 6) {
      case 0: {  // Raw frames, exactly as received from the socket.
        transport::Frames frames;
        frames.peer = peer;
        const int n = s.byte() % 4;
        for (int i = 0; i < n; ++i) {
          std::string c = s.chunk();
          frames.bytes += c.size();
          frames.parts.emplace_back(c.data(), c.size());
        }
        auto parsed = transport::parseFrames(frames);
        if (!parsed.message) {
          out = f.core->onMalformed(peer, parsed.reason);
          require(f.core->rejectedTotal() == rejected_before + 1);
        } else {
          out = f.core->onMessage(peer, *parsed.message, frames.bytes, f.now);
        }
        break;
      }
      case 1: {  // A fuzzed envelope with the fields that gate deeper checks made right.
        Message m;
        if (!m.envelope.ParseFromString(s.chunk())) {
          out = f.core->onMalformed(peer, "envelope does not parse");
          break;
        }
        const uint8_t fix = s.byte();
        if (fix & 1) m.envelope.set_version(wire::PROTOCOL_VERSION);
        if (m.envelope.has_push()) {
          auto* p = m.envelope.mutable_push();
          if (fix & 2) p->set_session(f.session);
          if (fix & 4) p->set_worker_id(peer_id);
          if (fix & 8) p->set_round(f.core->round());
        } else if (m.envelope.has_heartbeat() && (fix & 2)) {
          m.envelope.mutable_heartbeat()->set_session(f.session);
        } else if (m.envelope.has_leave() && (fix & 2)) {
          m.envelope.mutable_leave()->set_session(f.session);
        }
        std::string payload = s.chunk();
        m.payload.assign(payload.begin(), payload.end());
        out = f.core->onMessage(peer, m, payload.size() + 16, f.now);
        break;
      }
      case 2: {  // A push that passes every envelope check, carrying fuzzed gradient bytes.
        Message m;
        m.envelope = makeEnvelope();
        auto* p = m.envelope.mutable_push();
        p->set_session(f.session);
        p->set_worker_id(peer_id);
        p->set_round(f.core->round() + (s.byte() % 3 == 0 ? 1 : 0));
        p->set_local_loss(double(s.byte()) / 16.0);
        std::string payload = s.chunk();
        m.payload.assign(payload.begin(), payload.end());
        out = f.core->onMessage(peer, m, payload.size() + 16, f.now);
        break;
      }
      case 3:  // Time passes: deadlines, heartbeats, patience.
        f.now += double(s.byte()) / 32.0;
        out = f.core->onTick();
        break;
      case 4: {  // A valid push, so rounds close and later states are reachable.
        Message m;
        m.envelope = makeEnvelope();
        auto* p = m.envelope.mutable_push();
        p->set_session(f.session);
        p->set_worker_id(peer_id);
        p->set_round(f.core->round());
        p->set_local_loss(1.0);
        m.payload = f.valid_gradient;
        out = f.core->onMessage(peer, m, m.payload.size() + 16, f.now);
        break;
      }
      case 5: {  // Checkpoint bytes: fuzzed outright, or the real ones with bytes flipped.
        std::string c = s.chunk();
        if (op & 0x80) {
          std::string real = f.core->checkpoint();
          for (size_t i = 0; i + 1 < c.size() && !real.empty(); i += 2) {
            real[uint8_t(c[i]) * 7u % real.size()] ^= c[i + 1];
          }
          checkRestored(real, f);
        } else {
          checkRestored(c, f);
        }
        break;
      }
    }
    checkOutgoing(out);
    for (float x : f.core->parameters()) require(std::isfinite(x));
    require(f.core->round() >= round_before);
    if (f.core->round() == round_before) require(f.core->parameters() == params_before);
    require(f.core->rejectedTotal() >= rejected_before);
    // After the end (the workers' answers to the Finish still coming in) nothing moves the model
    // or reopens the run, and the answers awaited only ever fall.
    if (finished_before) {
      require(f.core->finished());
      require(f.core->round() == round_before);
      require(f.core->parameters() == params_before);
      require(f.core->finishUnacknowledged() <= unacked_before);
    }
  }
  return 0;
}
