// Writes the seed corpora under tests/fuzz/corpus/ (run by `run.sh seeds`): real encoded
// gradients of every scheme for codec_decode, and operation scripts for coordinator_messages that
// reach the interesting states (rounds closing, deadlines, checkpoints, each message type).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "message.hpp"

using namespace tern;

namespace {

void write(const std::filesystem::path& dir, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

std::vector<float> gradient(size_t d, uint64_t seed) {
  Rng rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> g(d);
  for (auto& x : g) x = n(rng);
  return g;
}

// Script helpers matching coordinator_messages_fuzz.cpp: op byte = case | peer << 4.
std::string chunk(const std::string& s) {
  std::string out;
  out += char(s.size() & 0xff);
  out += char(s.size() >> 8);
  return out + s;
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path root = argc > 1 ? argv[1] : "tests/fuzz/corpus";

  // codec_decode: every scheme at the quickstart model's size and at a small one.
  for (const auto& name : compression::compressorNames()) {
    for (uint32_t d : {7850u, 37u}) {
      compression::CompressorSpec spec;
      spec.name = name;
      spec.threshold = 0.5;
      auto c = compression::makeCompressor(spec);
      Rng rng(7);
      auto g = gradient(d, d);
      for (uint32_t level : {1u, d / 10 + 1, d}) {
        auto bytes = c->compress(g, level, rng).bytes;
        write(root / "codec_decode", name + "-" + std::to_string(d) + "-" + std::to_string(level),
              str(bytes));
        if (!c->hasLevel()) break;
      }
    }
  }
  compression::SparseGradient update;
  update.dim = 7850;
  update.indices = {0, 5, 4000, 7849};
  update.values = {0.5f, -1.0f, 2.0f, 3.0f};
  write(root / "codec_decode", "update-sparse", str(compression::encodeUpdate(update)));

  // coordinator_messages. The fixture: softmax 3 features x 2 classes (8 parameters), session
  // 0x5e55, workers "A" (id 0) and "B" (id 1) joined.
  const size_t d = 8;
  const uint64_t session = 0x5e55;
  Rng rng(1);
  auto valid =
      str(compression::makeCompressor({"identity"})->compress(gradient(d, 3), 0, rng).bytes);
  auto sparse = str(compression::makeCompressor({"topk"})->compress(gradient(d, 4), 3, rng).bytes);
  const std::filesystem::path cm = root / "coordinator_messages";
  const char A = 0x00, B = 0x10, Z = 0x20;

  std::string rounds;
  for (int i = 0; i < 4; ++i) rounds += std::string{char(A | 4), char(B | 4)};
  write(cm, "rounds-close", rounds);

  wire::Envelope push = makeEnvelope();
  push.mutable_push()->set_session(session);
  push.mutable_push()->set_worker_id(0);
  push.mutable_push()->set_round(0);
  push.mutable_push()->set_local_loss(0.7);
  std::string frames;
  frames += char(A | 0);
  frames += char(2);
  frames += chunk(push.SerializeAsString()) + chunk(valid);
  frames += char(B | 0);
  push.mutable_push()->set_worker_id(1);
  frames += char(2);
  frames += chunk(push.SerializeAsString()) + chunk(sparse);
  write(cm, "raw-push-frames", frames);

  std::string fuzzed_payload;
  fuzzed_payload += char(A | 2);
  fuzzed_payload += char(1);
  fuzzed_payload += char(16);
  fuzzed_payload += chunk(sparse);
  fuzzed_payload += char(B | 2);
  fuzzed_payload += char(1);
  fuzzed_payload += char(16);
  fuzzed_payload += chunk(valid);
  write(cm, "payload-pushes", fuzzed_payload);

  std::string deadline;
  deadline += char(A | 4);
  for (int i = 0; i < 6; ++i) deadline += std::string{char(A | 3), char(0x7f)};
  deadline += char(B | 4);
  write(cm, "deadline-and-patience", deadline);

  std::string envelopes;
  wire::Envelope hb = makeEnvelope();
  hb.mutable_heartbeat()->set_session(session);
  hb.mutable_heartbeat()->set_worker_id(0);
  envelopes += char(A | 1) + chunk(hb.SerializeAsString()) + char(3) + chunk("");
  wire::Envelope leave = makeEnvelope();
  leave.mutable_leave()->set_session(session);
  leave.mutable_leave()->set_worker_id(1);
  leave.mutable_leave()->set_reason("bye");
  envelopes += char(B | 1) + chunk(leave.SerializeAsString()) + char(3) + chunk("");
  wire::Envelope join = makeEnvelope();
  join.mutable_join()->set_worker_name("c");
  join.mutable_join()->set_sample_count(50);
  envelopes += char(Z | 1) + chunk(join.SerializeAsString()) + char(1) + chunk("");
  wire::Envelope ack = makeEnvelope();
  ack.mutable_ack()->set_round(0);
  envelopes += char(A | 1) + chunk(ack.SerializeAsString()) + char(1) + chunk("");
  envelopes += char(A | 1) + chunk(push.SerializeAsString()) + char(15) + chunk(valid);
  write(cm, "envelopes", envelopes);

  std::string checkpoints;
  checkpoints += std::string{char(A | 4), char(B | 4)};
  checkpoints += char(0x80 | A | 5) + chunk(std::string("\x03\x01\x40\x02\x91\x04", 6));
  checkpoints += char(A | 5) + chunk(std::string("\x08\x01\x10\x05", 4));
  write(cm, "checkpoints", checkpoints);
  std::printf("seed corpora written under %s\n", root.c_str());
  return 0;
}
