#pragma once
// The envelopes a worker sends (join, heartbeat, push, probe, leave): one builder and one parser
// each. The worker core, the tests and the coordinator read and write them through these, so a
// field is named in one place.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "message.hpp"

namespace tern::proto {

// What a join says besides the fields built from the shard (filled by the caller).
struct JoinFields {
  std::string worker_name;
  uint64_t join_nonce = 0;
  uint64_t instance = 0;  // 0 = not given
  uint64_t max_message_bytes = 0;
  std::optional<uint64_t> partition_fingerprint;  // with the shard index and total
  uint32_t shard_index = 0, shard_total = 0;
  std::optional<wire::LinkModel> link;  // what this process has measured of its link
  // The replica held: its round and tern::checksum.
  std::optional<std::pair<uint64_t, uint64_t>> replica;
  uint64_t sample_count = 0;
  std::vector<uint64_t> label_histogram;  // count per label 0, 1, ...
  std::vector<std::string> compressors;
  bool error_feedback = false;
};
Message joinMessage(const JoinFields& f);
std::optional<JoinFields> parseJoin(const Message& m);

// A worker's address at the coordinator: its id in the session that welcomed it.
struct WorkerAddress {
  uint64_t session = 0;
  uint32_t worker_id = 0;
};

Message heartbeatMessage(const WorkerAddress& from, uint64_t replica_round);
struct HeartbeatFields {
  WorkerAddress from;
  uint64_t round = 0;
};
std::optional<HeartbeatFields> parseHeartbeat(const Message& m);

// A gradient push for `round` without payload or report fields (the caller sets those).
Message pushMessage(const WorkerAddress& from, uint64_t round);
// Filler bytes for probes: every probe views one immutable buffer, replaced by a larger one when
// a larger probe is asked for (a probe keeps the buffer it views alive). Not thread-safe: one
// owner, or owners that never build probes at once (the simulator's workers).
class ProbeFiller {
 public:
  Payload bytes(size_t n);

 private:
  std::shared_ptr<const std::vector<uint8_t>> buffer_;
};
// A probe of `payload_bytes` filler bytes from `filler`, numbered probe_id, sent at `round`.
Message probeMessage(const WorkerAddress& from, uint64_t round, uint64_t probe_id,
                     size_t payload_bytes, ProbeFiller& filler);
struct PushFields {
  WorkerAddress from;
  uint64_t round = 0;
  bool probe = false;
  uint64_t probe_id = 0;
};
// A push or a probe.
std::optional<PushFields> parsePush(const Message& m);

Message leaveMessage(const WorkerAddress& from, const std::string& reason);
struct LeaveFields {
  WorkerAddress from;
  std::string reason;
};
std::optional<LeaveFields> parseLeave(const Message& m);

}  // namespace tern::proto
