#include "worker_messages.hpp"

#include <memory>
#include <vector>

namespace tern::proto {

namespace {
constexpr uint8_t kProbeFiller = 0x5a;
}  // namespace

Payload ProbeFiller::bytes(size_t n) {
  if (!buffer_ || buffer_->size() < n) {
    buffer_ = std::make_shared<const std::vector<uint8_t>>(n, kProbeFiller);
  }
  return Payload(buffer_, std::span<const uint8_t>(buffer_->data(), n));
}

Message joinMessage(const JoinFields& f) {
  Message m;
  m.envelope = makeEnvelope();
  auto* j = m.envelope.mutable_join();
  j->set_worker_name(f.worker_name);
  j->set_join_nonce(f.join_nonce);
  j->set_instance(f.instance);
  j->set_max_message_bytes(f.max_message_bytes);
  if (f.partition_fingerprint) {
    j->set_partition_fingerprint(*f.partition_fingerprint);
    j->set_shard_index(f.shard_index);
    j->set_shard_total(f.shard_total);
  }
  j->set_acks_finish(true);
  if (f.link) *j->mutable_link() = *f.link;
  if (f.replica) {
    j->set_replica_round(f.replica->first);
    j->set_replica_checksum(f.replica->second);
  }
  j->set_sample_count(f.sample_count);
  for (size_t c = 0; c < f.label_histogram.size(); ++c) {
    auto* lc = j->add_label_histogram();
    lc->set_label(int32_t(c));
    lc->set_count(f.label_histogram[c]);
  }
  for (const auto& n : f.compressors) j->add_compressors(n);
  j->set_error_feedback(f.error_feedback);
  return m;
}

std::optional<JoinFields> parseJoin(const Message& m) {
  if (!m.envelope.has_join()) return std::nullopt;
  const auto& j = m.envelope.join();
  JoinFields f;
  f.worker_name = j.worker_name();
  f.join_nonce = j.join_nonce();
  f.instance = j.instance();
  f.max_message_bytes = j.max_message_bytes();
  if (j.partition_fingerprint() != 0) {
    f.partition_fingerprint = j.partition_fingerprint();
    f.shard_index = j.shard_index();
    f.shard_total = j.shard_total();
  }
  if (j.has_link()) f.link = j.link();
  if (j.replica_checksum() != 0) f.replica = {j.replica_round(), j.replica_checksum()};
  f.sample_count = j.sample_count();
  for (const auto& lc : j.label_histogram()) {
    if (lc.label() < 0) continue;
    if (size_t(lc.label()) >= f.label_histogram.size())
      f.label_histogram.resize(size_t(lc.label()) + 1, 0);
    f.label_histogram[size_t(lc.label())] = lc.count();
  }
  f.compressors.assign(j.compressors().begin(), j.compressors().end());
  f.error_feedback = j.error_feedback();
  return f;
}

Message heartbeatMessage(const WorkerAddress& from, uint64_t replica_round) {
  Message m;
  m.envelope = makeEnvelope();
  auto* hb = m.envelope.mutable_heartbeat();
  hb->set_session(from.session);
  hb->set_worker_id(from.worker_id);
  hb->set_round(replica_round);
  return m;
}

std::optional<HeartbeatFields> parseHeartbeat(const Message& m) {
  if (!m.envelope.has_heartbeat()) return std::nullopt;
  const auto& hb = m.envelope.heartbeat();
  return HeartbeatFields{{hb.session(), hb.worker_id()}, hb.round()};
}

Message pushMessage(const WorkerAddress& from, uint64_t round) {
  Message m;
  m.envelope = makeEnvelope();
  auto* push = m.envelope.mutable_push();
  push->set_session(from.session);
  push->set_worker_id(from.worker_id);
  push->set_round(round);
  return m;
}

Message probeMessage(const WorkerAddress& from, uint64_t round, uint64_t probe_id,
                     size_t payload_bytes, ProbeFiller& filler) {
  Message m = pushMessage(from, round);
  m.envelope.mutable_push()->set_probe(true);
  m.envelope.mutable_push()->set_probe_id(probe_id);
  m.payload = filler.bytes(payload_bytes);
  return m;
}

std::optional<PushFields> parsePush(const Message& m) {
  if (!m.envelope.has_push()) return std::nullopt;
  const auto& p = m.envelope.push();
  return PushFields{{p.session(), p.worker_id()}, p.round(), p.probe(), p.probe_id()};
}

Message leaveMessage(const WorkerAddress& from, const std::string& reason) {
  Message m;
  m.envelope = makeEnvelope();
  auto* leave = m.envelope.mutable_leave();
  leave->set_worker_id(from.worker_id);
  leave->set_session(from.session);
  leave->set_reason(reason);
  return m;
}

std::optional<LeaveFields> parseLeave(const Message& m) {
  if (!m.envelope.has_leave()) return std::nullopt;
  const auto& l = m.envelope.leave();
  return LeaveFields{{l.session(), l.worker_id()}, l.reason()};
}

}  // namespace tern::proto
