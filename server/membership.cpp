#include "server/membership.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "common/config/settings.hpp"
#include "server/link_checks.hpp"

namespace tern::server {

double patienceFor(const Worker& w, const PatienceContext& c) {
  const wire::LinkModel& link = w.rec.link;
  const double b = fittedSecondsPerPacket(link);
  if (!c.collecting || !w.plan.in_round || w.pending) return c.patience;
  if (b <= 0.0 || link.packet_bytes() == 0) {
    // No fitted link: the round's deadline before this process's first push, then twice what
    // its last push took from the round start, up to the deadline.
    if (!w.observed_push_seconds || *w.observed_push_seconds <= 0.0)
      return std::max(c.patience, c.round_deadline);
    return std::max(c.patience, std::min(2.0 * *w.observed_push_seconds, c.round_deadline));
  }
  // Its push at its cap, priced by its own pushes, else everyone's, else as the model's floats.
  const auto& price = w.push_price ? w.push_price : c.mean_price;
  const double bytes = price ? price->per_push + price->per_coordinate * double(w.plan.round_cap)
                             : double(c.model_floats * sizeof(float));
  const double packets = std::ceil(bytes / double(link.packet_bytes()));
  const double push_seconds = std::max(0.0, link.a_seconds()) + b * packets;
  return std::max(c.patience, std::min(2.0 * push_seconds, c.round_deadline));
}

void clearReport(WorkerRecord& rec) {
  rec.level = 0;
  rec.predicted_cost = 0.0;
  rec.predicted_improvement = 0.0;
  rec.predicted_step = 0.0;
}

bool takeReport(WorkerRecord& rec, const wire::Push& push, size_t dim) {
  const bool usable = push.level() <= dim && std::isfinite(push.predicted_cost()) &&
                      push.predicted_cost() >= 0.0 && std::isfinite(push.predicted_improvement()) &&
                      std::isfinite(push.predicted_step()) && push.predicted_step() >= 0.0;
  if (!usable) {
    clearReport(rec);
    return false;
  }
  rec.level = push.level();
  rec.predicted_cost = push.predicted_cost();
  rec.predicted_improvement = push.predicted_improvement();
  rec.predicted_step = push.predicted_step();
  return true;
}

Worker* Membership::byPeer(const std::string& peer) {
  const auto ids = by_peer_.find(peer);
  if (ids == by_peer_.end()) return nullptr;
  for (uint32_t id : ids->second) {
    Worker& w = workers_.at(id);
    if (w.rec.alive) return &w;
  }
  return nullptr;
}

const Worker* Membership::byPeerAmong(const std::string& peer,
                                      const std::set<uint32_t>& ids) const {
  const auto held = by_peer_.find(peer);
  if (held == by_peer_.end()) return nullptr;
  const Worker* w = nullptr;
  for (uint32_t id : held->second) {
    if (workers_.at(id).rec.alive) {
      w = &workers_.at(id);
      break;
    }
  }
  for (auto it = held->second.begin(); !w && it != held->second.end(); ++it) {
    if (ids.count(*it)) w = &workers_.at(*it);
  }
  return w && ids.count(w->rec.id) ? w : nullptr;
}

void Membership::indexPeer(uint32_t id, const std::string& peer) { by_peer_[peer].insert(id); }

void Membership::unindexPeer(uint32_t id, const std::string& peer) {
  const auto ids = by_peer_.find(peer);
  if (ids == by_peer_.end()) return;
  ids->second.erase(id);
  if (ids->second.empty()) by_peer_.erase(ids);
}

Worker* Membership::byName(const std::string& name) {
  Worker* found = nullptr;
  for (auto& [id, w] : workers_) {
    if (w.rec.name == name) found = &w;
  }
  return found;
}

size_t Membership::alive() const {
  size_t n = 0;
  for (const auto& [id, w] : workers_) n += w.rec.alive ? 1 : 0;
  return n;
}

namespace {

std::optional<JoinRefusal> checkPartition(const std::map<uint32_t, Worker>& workers,
                                          const wire::Join& join) {
  if (join.partition_fingerprint() == 0) return std::nullopt;
  for (const auto& [id, other] : workers) {
    if (!other.rec.alive || !other.partition_fingerprint || other.rec.name == join.worker_name() ||
        *other.partition_fingerprint == join.partition_fingerprint()) {
      continue;
    }
    return JoinRefusal{wire::Error::PARTITION_MISMATCH, "partition_mismatch",
                       "this worker's shard " + std::to_string(join.shard_index()) + " of " +
                           std::to_string(join.shard_total()) +
                           " is cut from another partition than live worker '" + other.rec.name +
                           "''s shard " + std::to_string(other.shard_index) + " of " +
                           std::to_string(other.shard_total) +
                           ": every worker needs the same data set, data.shard.total and "
                           "data.partition"};
  }
  return std::nullopt;
}

std::optional<JoinRefusal> checkJoinAlone(const wire::Join& join, uint64_t largest_frame) {
  if (join.sample_count() == 0 || join.sample_count() > Membership::kMaxSamplesPerWorker) {
    return JoinRefusal{wire::Error::MALFORMED, "bad_join",
                       "join with " + std::to_string(join.sample_count()) + " samples (1 to " +
                           std::to_string(Membership::kMaxSamplesPerWorker) + ")"};
  }
  if (std::string why = config::workerNameProblem(join.worker_name()); !why.empty()) {
    return JoinRefusal{wire::Error::MALFORMED, "bad_join", "worker name " + why};
  }
  // A worker whose socket would drop the welcome or a dense round start hears so now.
  if (join.max_message_bytes() != 0 && largest_frame > join.max_message_bytes()) {
    return JoinRefusal{wire::Error::MESSAGE_LIMIT, "message_limit",
                       "the model's frames of up to " + std::to_string(largest_frame) +
                           " bytes do not fit this worker's max_message_bytes of " +
                           std::to_string(join.max_message_bytes()) + ": raise it to at least " +
                           std::to_string(largest_frame)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<JoinRefusal> Membership::checkJoin(const std::string& peer, const wire::Join& join,
                                                 uint64_t largest_frame, size_t max_workers,
                                                 double forget_after) {
  if (auto refusal = checkJoinAlone(join, largest_frame)) return refusal;
  const Worker* w = byName(join.worker_name());
  // A name belongs to one live process; the same process on a new connection keeps it, and a
  // join that does not say its process (instance 0) never takes it from a live holder.
  if (w && w->rec.alive && w->peer != peer &&
      (w->instance == 0 || w->instance != join.instance())) {
    return JoinRefusal{wire::Error::NAME_TAKEN, "name_taken",
                       "worker name '" + join.worker_name() +
                           "' is held by a live worker of another process; give each worker its "
                           "own name"};
  }
  if (const Worker* held = byPeer(peer); held && held->rec.name != join.worker_name()) {
    return JoinRefusal{wire::Error::NOT_ADMITTED, "one_name_per_connection",
                       "this connection holds live worker '" + held->rec.name +
                           "': a connection joins under one name"};
  }
  if (auto refusal = checkPartition(workers_, join)) return refusal;
  if (!w && workers_.size() >= max_workers) {
    return JoinRefusal{
        wire::Error::TOO_MANY_WORKERS, "too_many_workers",
        "the coordinator keeps track of max_workers = " + std::to_string(max_workers) +
            " workers already; a gone one is forgotten after " + std::to_string(int(forget_after)) +
            " s"};
  }
  return std::nullopt;
}

Worker& Membership::admit(const std::string& peer, const wire::Join& join, double now) {
  Worker* w = byName(join.worker_name());
  if (!w) {
    // Ids count up and wrap at 2^32: one a known worker holds is skipped, never shared.
    while (workers_.count(next_id_)) ++next_id_;
    const uint32_t id = next_id_++;
    w = &workers_[id];
    w->rec.id = id;
    w->rec.name = join.worker_name();
    indexPeer(id, w->peer);
    spdlog::info("worker {} joined as id {} with {} samples", join.worker_name(), id,
                 join.sample_count());
  } else {
    spdlog::info("worker {} re-joined as id {}", join.worker_name(), w->rec.id);
  }
  const uint64_t instance =
      join.instance() == 0 && w->rec.alive && w->peer == peer ? w->instance : join.instance();
  if (w->instance != instance) {
    // Another process under this name: the last one's measurements are no measure of this one.
    w->push_price.reset();
    w->round_push.reset();
    w->rec.link = {};
    w->observed_push_seconds.reset();
  }
  if (!w->rec.alive || w->instance != instance) w->joined_at = now;
  unindexPeer(w->rec.id, w->peer);
  w->peer = peer;
  indexPeer(w->rec.id, w->peer);
  w->instance = instance;
  w->acks_finish = join.acks_finish();
  w->samples = join.sample_count();
  w->partition_fingerprint = join.partition_fingerprint() != 0
                                 ? std::optional<uint64_t>(join.partition_fingerprint())
                                 : std::nullopt;
  w->shard_index = join.shard_index();
  w->shard_total = join.shard_total();
  warnSharedShard(*w);
  return *w;
}

void Membership::warnSharedShard(const Worker& w) const {
  for (const auto& [id, other] : workers_) {
    if (&other != &w && other.rec.alive && w.partition_fingerprint &&
        other.partition_fingerprint == w.partition_fingerprint &&
        other.shard_index == w.shard_index) {
      spdlog::warn("workers {} and {} both train on shard {} of {}: the same rows twice",
                   other.rec.name, w.rec.name, w.shard_index, w.shard_total);
    }
  }
}

std::optional<JoinRefusal> Membership::screenJoin(const std::string& peer, const wire::Join& join,
                                                  const SeatLimits& limits, double now) {
  if (!connection_joins_.take(peer, now)) {
    return JoinRefusal{wire::Error::TOO_MANY_WORKERS, "join_rate_connection",
                       "too many joins from this connection: try again in a few seconds"};
  }
  auto check = [&] {
    return checkJoin(peer, join, limits.largest_frame, limits.max_workers, limits.forget_after);
  };
  auto refusal = check();
  // A full table: a member that never pushed gives its seat up, one with history never does.
  if (refusal && refusal->code == wire::Error::TOO_MANY_WORKERS &&
      makeRoom(join.worker_name(), limits.max_workers, now, limits.pending_seconds)) {
    refusal = check();
  }
  return refusal;
}

bool Membership::makeRoom(const std::string& name, size_t max_workers, double now, double grace) {
  if (workers_.size() < max_workers || byName(name)) return false;
  auto victim = workers_.end();
  auto better = [&](const Worker& w) {
    if (victim == workers_.end()) return true;
    const Worker& v = victim->second;
    if (w.rec.alive != v.rec.alive) return !w.rec.alive;  // a gone one first
    return w.joined_at < v.joined_at;
  };
  for (auto it = workers_.begin(); it != workers_.end(); ++it) {
    const Worker& w = it->second;
    if (hasHistory(w) || w.rec.pushed || w.pending) continue;
    if (w.rec.alive && now - w.joined_at < grace) continue;
    if (better(w)) victim = it;
  }
  if (victim == workers_.end()) return false;
  spdlog::info("worker {} ({}) never pushed: its seat goes to newcomer {}", victim->first,
               victim->second.rec.name, name);
  unindexPeer(victim->first, victim->second.peer);
  workers_.erase(victim);
  return true;
}

void Membership::forget(double now, double horizon, double pending_horizon) {
  std::erase_if(workers_, [&](const auto& entry) {
    const Worker& w = entry.second;
    const double after = hasHistory(w) ? horizon : pending_horizon;
    const bool gone = !w.rec.alive && !w.rec.pushed && !w.pending && now - w.last_seen > after;
    if (gone) unindexPeer(entry.first, w.peer);
    return gone;
  });
}

void Membership::restore(std::map<uint32_t, Worker> workers, uint32_t next_id) {
  workers_ = std::move(workers);
  next_id_ = next_id;
  by_peer_.clear();
  for (const auto& [id, w] : workers_) indexPeer(id, w.peer);
}

std::vector<WorkerRecord> Membership::records() const {
  std::vector<WorkerRecord> out;
  out.reserve(workers_.size());
  for (const auto& [id, w] : workers_) out.push_back(w.rec);
  return out;
}

}  // namespace tern::server
