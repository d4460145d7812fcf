// The coordinator core's membership: a join is refused, with a coded error and counted, for a
// bad name or sample count, a name another live process holds, another data partition, a message
// limit too small for the model, or a full table; workers gone for long are forgotten.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "common/util/printable.hpp"
#include "coordinator_harness.hpp"

using namespace tern;
using namespace tern::testing;

TEST_CASE(
    "a join declaring more samples than a worker may have is refused, and shares stay in [0, 1]") {
  Harness h;
  CHECK(hasError(h.join("A", "a", uint64_t{1} << 63), wire::Error::MALFORMED));
  CHECK(hasError(h.join("A", "a", testing::DrivenCoordinator::kMaxSamplesPerWorker + 1),
                 wire::Error::MALFORMED));
  CHECK(h.core->rejections().at("bad_join") == 2);
  // Two workers at the limit each hold half of the data.
  const uint32_t a = idOf(h.join("A", "a", testing::DrivenCoordinator::kMaxSamplesPerWorker), "A");
  const uint32_t b = idOf(h.join("B", "b", testing::DrivenCoordinator::kMaxSamplesPerWorker), "B");
  const size_t d = h.core->parameters().size();
  h.core->onMessage("A", h.push(a, 0, std::vector<float>(d, 1.0f)), 50, h.now);
  h.core->onMessage("B", h.push(b, 0, std::vector<float>(d, 1.0f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  CHECK(recordOf(*h.core, a).share == 0.5);
  CHECK(recordOf(*h.core, b).share == 0.5);
  for (float x : h.core->parameters()) CHECK(std::isfinite(x));
}

TEST_CASE("a join is admitted under any name a worker's configuration accepts, and no longer one") {
  Harness h;
  CHECK(hasError(h.join("A", "", 100), wire::Error::MALFORMED));
  CHECK(hasError(h.join("A", std::string(config::kMaxWorkerNameBytes + 1, 'a'), 100),
                 wire::Error::MALFORMED));
  CHECK(h.core->rejections().at("bad_join") == 2);
  idOf(h.join("A", std::string(config::kMaxWorkerNameBytes, 'a'), 100), "A");
  CHECK(config::workerNameProblem(std::string(config::kMaxWorkerNameBytes, 'a')).empty());
  CHECK_FALSE(config::workerNameProblem(std::string(config::kMaxWorkerNameBytes + 1, 'a')).empty());
  CHECK_FALSE(config::workerNameProblem("").empty());
  // A name goes into the coordinator's logs and status: no line breaks or terminal escapes.
  CHECK(hasError(h.join("B", "pi\n[2026-01-01 00:00:00] [error] forged", 100),
                 wire::Error::MALFORMED));
  CHECK(hasError(h.join("C", "pi\x1b[2J", 100), wire::Error::MALFORMED));
  CHECK(hasError(h.join("D",
                        "pi\xc2\x9b"
                        "2J",
                        100),
                 wire::Error::MALFORMED));                              // C1 CSI
  CHECK(hasError(h.join("E", "pi\xff", 100), wire::Error::MALFORMED));  // not UTF-8
  CHECK(h.core->rejections().at("bad_join") == 6);
  CHECK(tern::printable("a\xc3\xbc\xff\xc2\x9b\nz") == "a\xc3\xbc\\xff\\xc2\\x9b\\x0az");
  // Cut between characters, never inside one.
  CHECK(tern::printable("\xc3\xbc\xc3\xbc\xc3\xbc", 5) == "\xc3\xbc\xc3\xbc...");
  CHECK_FALSE(config::workerNameProblem("pi\t3").empty());
  CHECK(config::workerNameProblem("pi-3 (kitchen, ünïcode)").empty());
}

TEST_CASE(
    "a name with an invisible or direction-changing character is refused, any script passes") {
  // Each could make one worker's name pass for another's in logs and status.
  for (const char* invisible : {"worker-0\u200b", "worker-\u202e0", "worker-0\u2028[error] x",
                                "\ufeffworker-0", "worker\u00ad-0", "worker-\u20600"}) {
    CHECK_MESSAGE(!config::workerNameProblem(invisible).empty(), invisible);
    CHECK(tern::printable(invisible).find("\\x") != std::string::npos);
  }
  CHECK_FALSE(config::workerNameProblem("worker-0\u3164").empty());      // a Hangul filler
  CHECK_FALSE(config::workerNameProblem("worker-0\U000E0041").empty());  // a tag character
  // Joiners stay: Persian and Indic names and emoji sequences need them.
  for (const char* fine :
       {"пи-1", "ラズパイ-2", "جهاز-3", "w\u00e9-4", "می\u200cخواهم", "क्\u200dष", "👩\u200d💻"}) {
    CHECK_MESSAGE(config::workerNameProblem(fine).empty(), fine);
  }
}

TEST_CASE("a name held by a live worker process is refused to another, kept on a reconnect") {
  Harness h;
  h.withTimers(2.0, 10.0);
  const uint32_t a = idOf(h.join("A", "pi", 100, 7), "A");
  // Another process configured with the same name: refused, and the holder keeps its place.
  auto out = h.join("B", "pi", 300, 8);
  CHECK(hasError(out, wire::Error::NAME_TAKEN));
  CHECK(h.core->rejections().at("name_taken") == 1);
  CHECK(h.core->aliveWorkers() == 1);
  // The holder on a new connection (same process): the name and id stay its own.
  CHECK(idOf(h.join("A2", "pi", 100, 7), "A2") == a);
  // Once the holder is marked gone the name is free for the other process, under the same id.
  h.now += 10.5;
  h.core->onTick();
  CHECK(idOf(h.join("B", "pi", 300, 8), "B") == a);
  // A join that gives no instance never takes the name from a live holder (no bypass).
  CHECK(hasError(h.join("C", "pi", 300, 0), wire::Error::NAME_TAKEN));
  CHECK(h.core->rejections().at("name_taken") == 2);
}

TEST_CASE("a join cut from another partition than a live worker's is refused, saying both") {
  Harness h;
  h.withTimers(2.0, 10.0);
  auto joinCut = [&](const std::string& peer, const std::string& name, uint64_t fingerprint,
                     uint32_t index, uint32_t total) {
    Message m;
    m.envelope = makeEnvelope();
    auto* j = m.envelope.mutable_join();
    j->set_worker_name(name);
    j->set_sample_count(100);
    j->set_partition_fingerprint(fingerprint);
    j->set_shard_index(index);
    j->set_shard_total(total);
    return h.core->onMessage(peer, m, 10, h.now);
  };
  const uint32_t a = idOf(joinCut("A", "a", 11, 0, 2), "A");
  // A second worker that cut its shard with data.shard.total 3: refused, with both shards named.
  auto out = joinCut("B", "b", 22, 1, 3);
  REQUIRE(hasError(out, wire::Error::PARTITION_MISMATCH));
  const std::string text = out[0].message.envelope.error().text();
  CHECK(text.find("shard 1 of 3") != std::string::npos);
  CHECK(text.find("'a''s shard 0 of 2") != std::string::npos);
  CHECK(h.core->rejections().at("partition_mismatch") == 1);
  CHECK(h.core->aliveWorkers() == 1);
  // The same partition: admitted. A worker that says none (older, or the simulator's): admitted.
  CHECK(idOf(joinCut("B", "b", 11, 1, 2), "B") != a);
  CHECK(idOf(joinCut("C", "c", 0, 0, 0), "C") != a);
  // A live worker re-joining with another partition is compared with the others, not itself.
  CHECK(hasError(joinCut("A", "a", 33, 0, 4), wire::Error::PARTITION_MISMATCH));
  // Once every worker of the old partition is gone, a new one may begin.
  h.now += 10.5;
  h.core->onTick();
  REQUIRE(h.core->aliveWorkers() == 0);
  CHECK(idOf(joinCut("D", "d", 33, 0, 4), "D") != a);  // idOf fails the test without a welcome
  CHECK(h.core->aliveWorkers() == 1);
}

TEST_CASE("a join whose worker could not take the model's welcome is refused, saying why") {
  // The largest frame a worker is sent, measured: a round start after dense pushes carries a
  // dense update, the model's floats and the update's header.
  size_t largest = 0;
  {
    Harness run;
    const auto [a, b] = run.joinAB();
    const size_t d = run.core->parameters().size();
    run.core->onMessage("A", run.push(a, 0, ramp(d, 1.0f, 1.0f)), 50, run.now);
    for (const auto& o : run.core->onMessage("B", run.push(b, 0, ramp(d, 2.0f, 1.0f)), 50, run.now))
      if (o.message.envelope.has_round_start())
        largest = std::max(largest, o.message.payload.size());
  }
  Harness h;
  const size_t model_bytes = h.core->parameters().size() * sizeof(float);
  REQUIRE(largest > model_bytes);
  Message m;
  m.envelope = makeEnvelope();
  m.envelope.mutable_join()->set_worker_name("small");
  m.envelope.mutable_join()->set_sample_count(10);
  // Room for the model's welcome but not for a dense update: its rounds would be dropped.
  m.envelope.mutable_join()->set_max_message_bytes(model_bytes);
  auto out = h.core->onMessage("S", m, 10, h.now);
  REQUIRE(hasError(out, wire::Error::MESSAGE_LIMIT));
  CHECK(out[0].message.envelope.error().text().find("at least " + std::to_string(largest)) !=
        std::string::npos);
  CHECK(h.core->aliveWorkers() == 0);
  m.envelope.mutable_join()->set_max_message_bytes(largest - 1);
  CHECK(hasError(h.core->onMessage("S", m, 10, h.now), wire::Error::MESSAGE_LIMIT));
  // Room for exactly the largest frame: welcomed.
  m.envelope.mutable_join()->set_max_message_bytes(largest);
  CHECK(idOf(h.core->onMessage("S", m, 10, h.now), "S") == 0);
}

TEST_CASE("past max_workers known workers a new name is refused until one is forgotten") {
  Harness h;
  h.settings.max_workers = 3;
  h.withTimers(2.0, 3.0);
  const uint32_t a = idOf(h.join("A", "a", 100, 5), "A");
  for (const char* name : {"b", "c"})
    idOf(h.join(std::string("P") + name, name, 10), std::string("P") + name);
  // A flood of new names: each refused and counted, the table stays at three.
  for (int i = 0; i < 50; ++i) {
    const std::string name = "flood" + std::to_string(i);
    // Appended, not "F" + ...: GCC 12 warns (-Wrestrict, a false positive) on operator+ there.
    auto out = h.join(std::string("F").append(std::to_string(i)), name, 10);
    REQUIRE(hasError(out, wire::Error::TOO_MANY_WORKERS));
  }
  CHECK(h.core->rejections().at("too_many_workers") == 50);
  CHECK(h.core->aliveWorkers() == 3);
  // A known name still re-joins (its process on a new connection).
  CHECK(idOf(h.join("A2", "a", 100, 5), "A2") == a);
  // Once b and c have been silent past the horizon (600 s) they are forgotten, and a new name
  // gets in.
  const Message hb = h.heartbeat(a);
  for (int t = 0; t < 70; ++t) {
    h.now += 10.0;
    h.core->onMessage("A2", hb, 10, h.now);
    h.core->onTick();
  }
  CHECK(idOf(h.join("N", "newcomer", 10), "N") == 3);
}

TEST_CASE("workers gone for long are forgotten, so the table does not grow with every name seen") {
  Harness h;
  h.withTimers(2.0, 3.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  // Forty short-lived workers (killed, never back) join and fall silent.
  for (int i = 0; i < 40; ++i) {
    const std::string number = std::to_string(i);
    const std::string peer = std::string("X").append(number);
    idOf(h.join(peer, std::string("x").append(number), 10), peer);
  }
  const Message hb = h.heartbeat(a);
  auto beat = [&] { h.core->onMessage("A", hb, 10, h.now); };
  h.now += 4.0;
  beat();
  h.core->onTick();  // marked gone, still known: one coming back now keeps its id
  CHECK(h.core->aliveWorkers() == 1);
  CHECK(idOf(h.join("X0b", "x0", 10), "X0b") == 1);
  // Past the horizon (600 s here: ten patiences are less) the silent ones are forgotten; the
  // worker that kept sending heartbeats, and the one that came back, stay.
  for (int t = 0; t < 61; ++t) {
    h.now += 10.0;
    beat();
    h.core->onMessage(
        "X0b",
        [&] {
          Message m = hb;
          m.envelope.mutable_heartbeat()->set_worker_id(1);
          return m;
        }(),
        10, h.now);
    h.core->onTick();
  }
  CHECK(h.core->aliveWorkers() == 2);
  // The checkpoint holds the two alone.
  wire::Checkpoint cp;
  REQUIRE(cp.ParseFromString(server::unsealCheckpoint(h.core->checkpoint())));
  CHECK(cp.workers_size() == 2);
  // A forgotten name that returns joins as a new worker, under a new id.
  CHECK(idOf(h.join("X5b", "x5", 10), "X5b") == 41);
}

TEST_CASE("a worker gone right after its push is forgotten too, once its round has closed") {
  Harness h;
  h.withTimers(2.0, 3.0);
  const uint32_t a = idOf(h.join("A", "a", 100), "A");
  const uint32_t b = idOf(h.join("B", "b", 100), "B");
  const size_t d = h.core->parameters().size();
  // b pushes and falls silent (a fast worker, then unplugged) while the round waits for a.
  h.core->onMessage("B", h.push(b, 0, std::vector<float>(d, 0.5f)), 50, h.now);
  const Message hb = h.heartbeat(a);
  h.now += 4.0;
  h.core->onMessage("A", hb, 10, h.now);
  h.core->onTick();  // b marked gone, its push still in the round
  REQUIRE(h.core->aliveWorkers() == 1);
  h.core->onMessage("A", h.push(a, 0, std::vector<float>(d, 0.5f)), 50, h.now);
  REQUIRE(h.core->round() == 1);
  // Far past the horizon, a still beating, b silent throughout.
  for (int t = 0; t < 70; ++t) {
    h.now += 10.0;
    h.core->onMessage("A", hb, 10, h.now);
    h.core->onTick();
  }
  CHECK(h.core->aliveWorkers() == 1);
  wire::Checkpoint cp;
  REQUIRE(cp.ParseFromString(server::unsealCheckpoint(h.core->checkpoint())));
  CHECK(cp.workers_size() == 1);
}
