// The checkpoint codec: a state value round-trips through its bytes, and damaged bytes or bytes
// of another model are refused.
#include "server/checkpoint_codec.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

#include "common/ml/model.hpp"
#include "common/util/checksum.hpp"

using namespace tern;
using namespace tern::server;

namespace {

config::CoordinatorSettings settings() {
  config::CoordinatorSettings s;
  s.model.kind = "softmax";
  s.model.features = 3;
  s.model.classes = 2;
  return s;
}

CheckpointState state(const CoordinatorOptions& s) {
  CheckpointState c;
  c.session = 9;
  c.round = 4;
  c.model = s.model;
  const size_t n = ml::makeModel(s.model)->numParams();
  c.parameters.assign(n, 0.5f);
  c.velocity.assign(n, -0.25f);
  c.next_worker_id = 3;
  Worker& w = c.workers[1];
  w.rec.id = 1;
  w.rec.name = std::string(1, 'b');
  w.rec.cap = 7;
  w.rec.upload_bytes = 1234;
  w.samples = 100;
  w.instance = 77;
  w.push_price = allocation::PushPrice{60.0, 8.0};
  w.rec.missed_in_row = 4;
  w.rec.benched = true;
  w.rec.probe_round = 3;
  w.rec.pushes_clipped = 2;
  c.mean_price = allocation::PushPrice{50.0, 6.0};
  c.allocation_method = "uniform";
  c.rounds_since_plan = 2;
  c.counters.upload_bytes = 5000;
  c.counters.steps_refused = 1;
  c.counters.pushes_clipped = 6;
  c.counters.benched = 2;
  c.counters.evaluations_unusable = 5;
  c.counters.rejections["late_or_future_round"] = 3;
  c.last_accuracy = 0.75;
  c.accuracy_known = true;
  c.last_train_loss = 0.4;
  c.elapsed_seconds = 12.5;
  return c;
}

}  // namespace

TEST_CASE("the download residual is kept, and a damaged one refused") {
  const auto s = coordinatorOptions(settings());
  CheckpointState in = state(s);
  in.download_residual.assign(in.parameters.size(), 0.0f);
  in.download_residual[1] = -0.125f;
  CHECK(decodeCheckpoint(encodeCheckpoint(in), s).download_residual == in.download_residual);
  in.download_residual.pop_back();
  CHECK_THROWS_WITH(decodeCheckpoint(encodeCheckpoint(in), s),
                    doctest::Contains("checkpoint download residual has"));
}

TEST_CASE("a checkpoint decodes to the state it was encoded from") {
  const auto s = coordinatorOptions(settings());
  const CheckpointState in = state(s);
  const CheckpointState out = decodeCheckpoint(encodeCheckpoint(in), s);
  CHECK(out.session == 9);
  CHECK(out.round == 4);
  CHECK(out.parameters == in.parameters);
  CHECK(out.velocity == in.velocity);
  CHECK(out.download_residual.empty());
  CHECK(out.next_worker_id == 3);
  REQUIRE(out.workers.count(1));
  const Worker& w = out.workers.at(1);
  CHECK(w.rec.name == "b");
  CHECK(w.rec.cap == 7);
  CHECK(w.rec.upload_bytes == 1234);
  CHECK_FALSE(w.rec.alive);
  CHECK(w.samples == 100);
  CHECK(w.instance == 77);
  REQUIRE(w.push_price);
  CHECK(w.push_price->per_push == 60.0);
  REQUIRE(out.mean_price);
  CHECK(out.mean_price->per_coordinate == 6.0);
  CHECK(out.rounds_since_plan == 2);
  CHECK(out.counters.upload_bytes == 5000);
  CHECK(out.counters.steps_refused == 1);
  // A straggler stays benched over a restart, and the robustness counters go on.
  CHECK(w.rec.missed_in_row == 4);
  CHECK(w.rec.benched);
  CHECK(w.rec.probe_round == 3);
  CHECK(w.rec.pushes_clipped == 2);
  CHECK(out.counters.pushes_clipped == 6);
  CHECK(out.counters.benched == 2);
  CHECK(out.counters.evaluations_unusable == 5);
  CHECK(out.counters.rejections.at("late_or_future_round") == 3);
  CHECK(out.counters.rejectedTotal() == 3);
  CHECK(out.accuracy_known);
  CHECK(out.last_accuracy == 0.75);
  CHECK(out.elapsed_seconds == 12.5);
  CHECK_FALSE(out.finished);
}

TEST_CASE("empty, damaged or foreign checkpoints are refused") {
  const auto s = coordinatorOptions(settings());
  const std::string good = encodeCheckpoint(state(s));
  CHECK_THROWS_AS(decodeCheckpoint("", s), std::runtime_error);
  CHECK_THROWS_AS(decodeCheckpoint(good.substr(0, good.size() / 2), s), std::runtime_error);
  auto other = s;
  other.model.features = 4;
  CHECK_THROWS_AS(decodeCheckpoint(good, other), std::runtime_error);
  CheckpointState bad_price = state(s);
  bad_price.mean_price = allocation::PushPrice{10.0, 0.0};
  CHECK_THROWS_AS(decodeCheckpoint(encodeCheckpoint(bad_price), s), std::runtime_error);
  CheckpointState bad_id = state(s);
  bad_id.next_worker_id = 1;  // worker 1 cannot have been handed out
  CHECK_THROWS_AS(decodeCheckpoint(encodeCheckpoint(bad_id), s), std::runtime_error);
}

TEST_CASE("any flipped bit or cut anywhere in a checkpoint file is refused, never restored") {
  const auto s = coordinatorOptions(settings());
  const std::string good = encodeCheckpoint(state(s));
  REQUIRE(decodeCheckpoint(good, s).round == 4);
  size_t refused = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = good;
      damaged[i] = char(damaged[i] ^ (1 << bit));
      try {
        (void)decodeCheckpoint(damaged, s);
        FAIL("byte " << i << " bit " << bit << " flipped restored");
      } catch (const std::runtime_error&) {
        ++refused;
      }
    }
  }
  CHECK(refused == 8 * good.size());
  for (size_t cut = 0; cut < good.size(); ++cut) {
    CAPTURE(cut);
    CHECK_THROWS_AS(decodeCheckpoint(good.substr(0, cut), s), std::runtime_error);
  }
  CHECK_THROWS_AS(decodeCheckpoint(good + '\0', s), std::runtime_error);
}

TEST_CASE("a checkpoint of another file format is refused, saying which format it is") {
  const auto s = coordinatorOptions(settings());
  const std::string good = encodeCheckpoint(state(s));
  // Format 1 was the bare message, without header or whole-file checksum.
  const std::string format1 = unsealCheckpoint(good);
  try {
    (void)decodeCheckpoint(format1, s);
    FAIL("a format 1 checkpoint restored");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("file format 1") != std::string::npos);
  }
  // A later format (its checksum intact) is named too.
  std::string later = good.substr(0, good.size() - 8);
  later[8] = 3;  // the format field follows the 8-byte magic, little-endian
  uint64_t h = kFnvOffset;
  for (char c : later) h = fnv1a(h, uint8_t(c), 1);
  for (int i = 0; i < 8; ++i) later.push_back(char((h >> (8 * i)) & 0xFF));
  try {
    (void)decodeCheckpoint(later, s);
    FAIL("a format 3 checkpoint restored");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("file format 3") != std::string::npos);
  }
  // Larger than any checkpoint of this model: refused before it is parsed.
  const std::string huge(checkpointSizeLimit(s.model) + 1, '\0');
  CHECK_THROWS_AS(decodeCheckpoint(huge, s), std::runtime_error);
}

TEST_CASE("a worker named as no join may be named is forgotten, the rest restored") {
  const auto s = coordinatorOptions(settings());
  CheckpointState c = state(s);
  Worker& odd = c.workers[2];
  odd.rec.id = 2;
  odd.rec.name = std::string("bad\nname");
  odd.samples = 5;
  const CheckpointState out = decodeCheckpoint(encodeCheckpoint(c), s);
  CHECK(out.workers.size() == 1);
  CHECK(out.workers.count(1) == 1);
}

TEST_CASE("a checkpoint of an MLP of another hidden width is refused naming both widths") {
  auto c = settings();
  c.model.kind = "mlp";
  c.model.hidden = 64;
  const auto s = coordinatorOptions(c);
  const std::string good = encodeCheckpoint(state(s));
  auto narrower = s;
  narrower.model.hidden = 32;
  try {
    decodeCheckpoint(good, narrower);
    FAIL("a checkpoint of 64 hidden units was taken for 32");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("64 hidden units") != std::string::npos);
    CHECK(what.find("32 hidden units") != std::string::npos);
  }
}
