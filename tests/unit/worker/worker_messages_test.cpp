// proto/worker_messages: each envelope a worker sends parses back to the fields it was built from.
#include "proto/worker_messages.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace tern;

TEST_CASE("a join parses back to the fields it was built from") {
  proto::JoinFields f;
  f.worker_name = "pi-3";
  f.join_nonce = 4;
  f.instance = 77;
  f.max_message_bytes = 1 << 20;
  f.partition_fingerprint = 99;
  f.shard_index = 1;
  f.shard_total = 3;
  f.replica = std::pair<uint64_t, uint64_t>{12, 0xabc};
  f.sample_count = 60;
  f.label_histogram = {20, 0, 40};
  f.compressors = {"topk", "identity"};
  f.error_feedback = true;
  const Message m = proto::joinMessage(f);
  CHECK(m.envelope.version() == wire::PROTOCOL_VERSION);
  CHECK(m.envelope.join().acks_finish());
  const auto back = proto::parseJoin(m);
  REQUIRE(back.has_value());
  CHECK(back->worker_name == "pi-3");
  CHECK(back->join_nonce == 4);
  CHECK(back->instance == 77);
  CHECK(back->max_message_bytes == (1 << 20));
  CHECK(back->partition_fingerprint == 99);
  CHECK(back->shard_index == 1);
  CHECK(back->shard_total == 3);
  CHECK(back->replica == f.replica);
  CHECK(back->sample_count == 60);
  CHECK(back->label_histogram == f.label_histogram);
  CHECK(back->compressors == f.compressors);
  CHECK(back->error_feedback);
  CHECK_FALSE(back->link.has_value());
}

TEST_CASE("a join without a replica or a partition says neither") {
  proto::JoinFields f;
  f.worker_name = "w";
  const Message m = proto::joinMessage(f);
  CHECK(m.envelope.join().replica_checksum() == 0);
  CHECK(m.envelope.join().partition_fingerprint() == 0);
  const auto back = proto::parseJoin(m);
  REQUIRE(back.has_value());
  CHECK_FALSE(back->replica.has_value());
  CHECK_FALSE(back->partition_fingerprint.has_value());
}

TEST_CASE("heartbeat, push, probe and leave parse back, another envelope is not taken for one") {
  const proto::WorkerAddress from{0x1234, 5};
  const auto hb = proto::parseHeartbeat(proto::heartbeatMessage(from, 8));
  REQUIRE(hb.has_value());
  CHECK(hb->from.session == 0x1234);
  CHECK(hb->from.worker_id == 5);
  CHECK(hb->round == 8);
  const auto push = proto::parsePush(proto::pushMessage(from, 9));
  REQUIRE(push.has_value());
  CHECK(push->round == 9);
  CHECK_FALSE(push->probe);
  proto::ProbeFiller filler;
  const Message probe = proto::probeMessage(from, 9, 3, 100, filler);
  CHECK(probe.payload.size() == 100);
  const auto p = proto::parsePush(probe);
  REQUIRE(p.has_value());
  CHECK(p->probe);
  CHECK(p->probe_id == 3);
  const auto leave = proto::parseLeave(proto::leaveMessage(from, "stopped by signal"));
  REQUIRE(leave.has_value());
  CHECK(leave->from.worker_id == 5);
  CHECK(leave->reason == "stopped by signal");
  CHECK_FALSE(proto::parseLeave(proto::pushMessage(from, 1)).has_value());
  CHECK_FALSE(proto::parseJoin(proto::heartbeatMessage(from, 1)).has_value());
  CHECK_FALSE(proto::parsePush(proto::leaveMessage(from, "")).has_value());
}

TEST_CASE("probes share their filler's buffer, and writing one probe's bytes leaves the others") {
  const proto::WorkerAddress from{77, 5};
  proto::ProbeFiller filler;
  Message small = proto::probeMessage(from, 1, 1, 300, filler);
  const Message large = proto::probeMessage(from, 1, 2, 5000, filler);
  const Message again = proto::probeMessage(from, 1, 3, 300, filler);
  CHECK(large.payload.size() == 5000);
  CHECK(again.payload.size() == 300);
  CHECK(again.payload.data() == large.payload.data());  // the larger buffer, no new bytes
  const auto all_filler = [](const Payload& p) {
    return std::all_of(p.begin(), p.end(), [&](uint8_t b) { return b == p[0]; });
  };
  CHECK(all_filler(small.payload));
  CHECK(all_filler(large.payload));
  CHECK(small.payload[0] == large.payload[0]);
  const uint8_t byte = large.payload[0];
  small.payload.mutableData()[0] = uint8_t(byte + 1);  // copied first: shared bytes
  CHECK(small.payload[0] == uint8_t(byte + 1));
  CHECK(large.payload[0] == byte);
  CHECK(again.payload[0] == byte);
  // Another filler (another worker's) holds bytes of its own: nothing is process-wide.
  proto::ProbeFiller other;
  CHECK(proto::probeMessage(from, 1, 4, 300, other).payload.data() != again.payload.data());
}
