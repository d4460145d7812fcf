#pragma once
// Membership: the coordinator's table of workers (by id, in id order), the checks a join must
// pass, how long a worker may stay silent, and forgetting workers gone for long.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "common/allocation/budget.hpp"
#include "common/allocation/link_costs.hpp"
#include "common/compression/compressor.hpp"
#include "server/join_limiter.hpp"
#include "server/round_record.hpp"

namespace tern::server {

// One accepted push's bytes, folded into the measured push prices when its round closes.
struct PushSample {
  double fixed = 0.0;
  double coordinate_bytes = 0.0;
  double coordinates = 0.0;
};

// What the last cap plan charged a worker, and its seat in the round being collected.
struct PlannedCap {
  double seconds_per_packet = 0.0;  // its link's fitted b when the caps were planned
  double unit_seconds = 0.0;        // link seconds per unit of its packing (0 = not in seconds)
  allocation::Packing packing;
  allocation::PushPrice price;  // the price its cap was planned at
  bool in_round = false;        // holds a cap in the open round
  uint32_t round_cap = 0;
};

struct Worker {
  WorkerRecord rec;
  std::string peer;
  uint64_t samples = 0;
  uint64_t instance = 0;     // the worker process holding the name (0 = unknown)
  bool acks_finish = false;  // answers a Finish with a Leave
  bool evaluates = false;    // has held-out rows: asked for federated evaluations
  uint64_t eval_rows = 0;    // the held-out rows its join declared: the most an evaluation counts
  double last_seen = 0.0;
  double last_sent = 0.0;
  double joined_at = 0.0;                // when its present process joined (not checkpointed)
  std::optional<uint64_t> synced_round;  // the model round its replica holds
  std::optional<uint64_t> partition_fingerprint;
  uint32_t shard_index = 0;
  uint32_t shard_total = 0;
  // The open round's push: decoded gradient, its loss, or refused (asked again at the deadline).
  std::optional<compression::SparseGradient> pending;
  // pending's norm, taken as it was accepted (off the round's close) when the step clips norms.
  std::optional<double> pending_norm;
  // Lets go of the open round's push and its norm together.
  void dropPush() {
    pending.reset();
    pending_norm.reset();
  }
  double loss = 0.0;
  bool refused = false;
  // Its own pushes' measured price (kept over re-joins of the same process) and this round's.
  std::optional<allocation::PushPrice> push_price;
  std::optional<PushSample> round_push;
  PlannedCap plan;
  std::optional<double> round_sent_at;          // when its last round start was sent
  std::optional<double> observed_push_seconds;  // round start to accepted push, last time
};

struct JoinRefusal {
  wire::Error::Code code;
  std::string reason;  // the rejection counter's name
  std::string text;
};

// Whether `w` ever pushed (a gradient or a calibration probe): a member with history, which a
// newcomer never displaces.
inline bool hasHistory(const Worker& w) { return w.rec.upload_bytes > 0; }

// What patienceFor needs besides the worker.
struct PatienceContext {
  double patience = 0.0;                            // worker_patience_seconds
  double round_deadline = 0.0;                      // round_deadline_seconds
  bool collecting = false;                          // a round is open
  std::optional<allocation::PushPrice> mean_price;  // everyone's measured push price
  size_t model_floats = 0;
  bool operator==(const PatienceContext&) const = default;
};

// How long `w` may stay silent before it is marked gone: the patience, or longer while its push
// for the open round is awaited (its heartbeats queue behind the push on a slow uplink).
double patienceFor(const Worker& w, const PatienceContext& c);

// The tuner's report with an accepted push (level, predictions) into `rec`; false (recorded as
// zeros) when no tuner makes it: a level beyond `dim`, a cost or step not finite and >= 0, an
// improvement not finite.
bool takeReport(WorkerRecord& rec, const wire::Push& push, size_t dim);
void clearReport(WorkerRecord& rec);

// What screenJoin checks a join against besides the table.
struct SeatLimits {
  uint64_t largest_frame = 0;  // the biggest message a member would get
  size_t max_workers = 0;
  double forget_after = 0.0;     // seconds a gone worker with history is kept
  double pending_seconds = 0.0;  // joins.pending_seconds
};

class Membership {
 public:
  Membership() = default;
  // joins: the rate of joins each connection may send.
  explicit Membership(JoinRate joins) : connection_joins_(joins) {}

  // The most samples a worker may declare in its join: shares then never overflow.
  static constexpr uint64_t kMaxSamplesPerWorker = uint64_t{1} << 40;

  // The table; callers may change a worker's fields but neither its peer nor the set of ids
  // (admit, makeRoom, forget and restore keep the by-peer index in step).
  std::map<uint32_t, Worker>& all() { return workers_; }
  const std::map<uint32_t, Worker>& all() const { return workers_; }
  // The live worker on ROUTER identity `peer` (lowest id), or nullptr; O(1) in the table's size.
  Worker* byPeer(const std::string& peer);
  // A worker told to finish on `peer`, alive or not, or nullptr.
  const Worker* byPeerAmong(const std::string& peer, const std::set<uint32_t>& ids) const;
  Worker* byName(const std::string& name);
  size_t alive() const;
  // Why `join` from `peer` is refused, or nothing. largest_frame: the biggest message it would get.
  // A name belongs to one live process (on another connection only its own nonzero instance
  // takes it) and a connection holds one live name.
  std::optional<JoinRefusal> checkJoin(const std::string& peer, const wire::Join& join,
                                       uint64_t largest_frame, size_t max_workers,
                                       double forget_after);
  // The worker the join names (kept id on a re-join, a new id otherwise), updated from it. A
  // live worker's nonzero instance is never replaced by a join's 0.
  Worker& admit(const std::string& peer, const wire::Join& join, double now = 0.0);
  // The join rate of `peer`'s connection, then checkJoin, making room (makeRoom) in a full table.
  std::optional<JoinRefusal> screenJoin(const std::string& peer, const wire::Join& join,
                                        const SeatLimits& limits, double now);
  // A full table makes room for a new name by forgetting a member without history: a gone one
  // first, else the live one that joined longest ago, at least `grace` seconds ago. Returns
  // whether it forgot one.
  bool makeRoom(const std::string& name, size_t max_workers, double now, double grace);
  // Forgets workers gone for longer than `horizon`, or than `pending_horizon` for those without
  // history (a push still in its round stays).
  void forget(double now, double horizon, double pending_horizon);
  void forget(double now, double horizon) { forget(now, horizon, horizon); }
  uint32_t nextId() const { return next_id_; }
  // Restoring: the table and the next id from a checkpoint.
  void restore(std::map<uint32_t, Worker> workers, uint32_t next_id);
  std::vector<WorkerRecord> records() const;

 private:
  void warnSharedShard(const Worker& w) const;
  void indexPeer(uint32_t id, const std::string& peer);
  void unindexPeer(uint32_t id, const std::string& peer);
  std::map<uint32_t, Worker> workers_;
  // The ids each ROUTER identity has been given, in id order (mostly one).
  std::unordered_map<std::string, std::set<uint32_t>> by_peer_;
  uint32_t next_id_ = 0;
  JoinLimiter connection_joins_{JoinRate{}};  // joins per connection (ROUTER identity)
};

}  // namespace tern::server
