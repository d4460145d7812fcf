#include "server/coordinator_core.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>

#include "common/allocation/link_costs.hpp"
#include "common/compression/codec.hpp"
#include "common/util/checksum.hpp"
#include "common/util/printable.hpp"
#include "common/util/rng.hpp"

namespace tern::server {

CoordinatorCore::CoordinatorCore(const config::CoordinatorSettings& settings,
                                 std::unique_ptr<ml::Model> model,
                                 std::shared_ptr<const ml::Dataset> test_data, uint64_t session,
                                 Clock clock)
    : settings_(settings),
      model_(std::move(model)),
      test_(std::move(test_data)),
      session_(session),
      clock_(std::move(clock)),
      allocator_(allocation::makeAllocator(settings.allocation.method)),
      optimizer_(settings.optimizer, model_->numParams()) {
  params_.assign(model_->numParams(), 0.0f);
  Rng rng(deriveSeed(settings_.training.seed, 0x6d6f64656cULL));
  model_->init(params_, rng);
  start_time_ = clock_();
}

uint64_t CoordinatorCore::rejectedTotal() const {
  uint64_t n = 0;
  for (const auto& [reason, count] : rejections_) n += count;
  return n;
}

size_t CoordinatorCore::aliveWorkers() const {
  size_t n = 0;
  for (const auto& [id, w] : workers_) n += w.rec.alive ? 1 : 0;
  return n;
}

CoordinatorCore::Worker* CoordinatorCore::byPeer(const std::string& peer) {
  for (auto& [id, w] : workers_) {
    if (w.peer == peer && w.rec.alive) return &w;
  }
  return nullptr;
}

Outgoing CoordinatorCore::reject(const std::string& peer, wire::Error::Code code,
                                 const std::string& reason, const std::string& text) {
  ++rejections_[reason];
  spdlog::debug("rejected message from a peer: {} ({})", reason, text);
  return errorTo(peer, code, text);
}

uint64_t CoordinatorCore::largestFrameBytes() {
  if (largest_frame_bytes_ == 0) {
    compression::SparseGradient dense;
    dense.dim = uint32_t(params_.size());
    dense.values.assign(params_.size(), 1.0f);
    largest_frame_bytes_ =
        std::max<uint64_t>(params_.size() * sizeof(float), compression::encodeUpdate(dense).size());
  }
  return largest_frame_bytes_;
}

Outgoing CoordinatorCore::errorTo(const std::string& peer, wire::Error::Code code,
                                  const std::string& text) {
  Outgoing out;
  out.peer = peer;
  out.message.envelope = makeEnvelope();
  auto* e = out.message.envelope.mutable_error();
  e->set_code(code);
  e->set_text(text);
  return out;
}

namespace {

// Why a worker's reported link model is not one a link could have, or nullptr. a may be
// negative (a token bucket sends the first packets after idle free: a ~ -b per packet it holds),
// but no bucket carries more than the largest message, max_message_bytes; a is 0 with b while
// unfitted; standard errors are +inf until they can be computed.
const char* invalidLinkModel(const wire::LinkModel& l, size_t max_message_bytes) {
  for (double v : {l.a_seconds(), l.b_seconds_per_packet(), l.r2()}) {
    if (!std::isfinite(v)) return "non-finite value";
  }
  // A standard error is +inf while the fit cannot compute it.
  if (std::isnan(l.a_stderr()) || std::isnan(l.b_stderr())) return "NaN standard error";
  constexpr double kMaxSeconds = 86400.0;
  if (l.b_seconds_per_packet() < 0 || l.b_seconds_per_packet() > kMaxSeconds)
    return "b out of range";
  const bool measured = l.samples() > 0 || l.b_seconds_per_packet() > 0;
  if (measured && (l.packet_bytes() < 64 || l.packet_bytes() > 65536)) {
    return "packet size out of range";
  }
  const double packet_bytes = measured ? l.packet_bytes() : 1448.0;
  // b = 0 reads "not measured"; a measured b faster than any link (a packet at 1 Tbit/s; the
  // worker's own fit stops at 100 Gbit/s) would be priced as free by the allocator.
  constexpr double kFastestBitsPerSecond = 1e12;
  if (l.b_seconds_per_packet() > 0 &&
      l.b_seconds_per_packet() < packet_bytes * 8.0 / kFastestBitsPerSecond) {
    return "b faster than any link";
  }
  const double max_packets = std::ceil(double(max_message_bytes) / packet_bytes);
  const double floor_a = -l.b_seconds_per_packet() * std::max(1.0, max_packets);
  const double slack = 1e-9 * std::abs(floor_a) + 1e-15;  // rounding of a = -b x
  if (l.a_seconds() < floor_a - slack || l.a_seconds() > kMaxSeconds) return "a out of range";
  if (l.a_stderr() < 0 || l.b_stderr() < 0) return "negative standard error";
  if (l.r2() > 1.0 + 1e-9) return "r2 above 1";
  return nullptr;
}

// A link's b once its fit separates it from a (its standard error computable), else 0: before
// that, a worker's b is the median time per packet, latency included.
double fittedSecondsPerPacket(const wire::LinkModel& l) {
  return std::isfinite(l.b_stderr()) ? l.b_seconds_per_packet() : 0.0;
}

}  // namespace

double CoordinatorCore::patienceFor(const Worker& w) const {
  const double patience = settings_.worker_patience_seconds;
  const wire::LinkModel& link = w.rec.link;
  const double b = fittedSecondsPerPacket(link);
  if (phase_ != Phase::kRunning || !w.in_round || w.pending) return patience;
  if (b <= 0.0 || link.packet_bytes() == 0) {
    // No fitted link (its first pushes, or a worker that does not measure): marking the worker
    // gone while it sends refuses the push and sends it round again, at the same cap and with
    // nothing measured, for as long as the push takes longer than the patience. Before this
    // process's first push the round's deadline (the round waits that long for it anyway); then
    // twice what its last push took from the round start to its arrival (its computation
    // included), up to the deadline.
    const double deadline = settings_.round_deadline_seconds;
    if (w.observed_push_seconds <= 0.0) return std::max(patience, deadline);
    return std::max(patience, std::min(2.0 * w.observed_push_seconds, deadline));
  }
  // Its push at its cap, priced by its own pushes, else by everyone's, else as the model's floats,
  // on its fitted link. Never past the round's deadline: a push later than that is late anyway.
  const PushBytes& price = w.push_bytes.known ? w.push_bytes : push_bytes_;
  const double bytes = price.known ? price.fixed + price.per_coordinate * double(w.round_cap)
                                   : double(params_.size() * sizeof(float));
  const double packets = std::ceil(bytes / double(link.packet_bytes()));
  const double push_seconds = std::max(0.0, link.a_seconds()) + b * packets;
  return std::max(patience, std::min(2.0 * push_seconds, settings_.round_deadline_seconds));
}

Outgoing CoordinatorCore::sendRoundStart(Worker& w) {
  w.round_sent_at = clock_();
  return send(w, roundStartFor(w));
}

Outgoing CoordinatorCore::send(Worker& w, Message m) {
  w.last_sent = clock_();
  size_t bytes = m.envelope.ByteSizeLong() + m.payload.size();
  w.rec.download_bytes += bytes;
  download_bytes_ += bytes;
  return Outgoing{w.peer, std::move(m)};
}

std::vector<Outgoing> CoordinatorCore::onMalformed(const std::string& peer,
                                                   const std::string& reason) {
  return {reject(peer, wire::Error::MALFORMED, reason, "malformed message: " + reason)};
}

std::vector<Outgoing> CoordinatorCore::onMessage(const std::string& peer, const Message& msg,
                                                 size_t wire_bytes, double received_at) {
  const auto& env = msg.envelope;
  if (env.version() != wire::PROTOCOL_VERSION) {
    return {reject(peer, wire::Error::BAD_VERSION, "bad_version",
                   "protocol version " + std::to_string(env.version()) + " not supported")};
  }
  if (phase_ == Phase::kDone) {
    // Told to finish: a live worker, or one marked gone (told too, not waited for).
    const Worker* w = byPeer(peer);
    for (auto it = workers_.begin(); !w && it != workers_.end(); ++it)
      if (it->second.peer == peer && told_to_finish_.count(it->first)) w = &it->second;
    if (w && told_to_finish_.count(w->rec.id)) {
      // A worker's Leave after the Finish says the Finish reached it. What it sent before the
      // Finish reached it (a heartbeat, a late push) is answered but not counted: the run's
      // record was closed with the Finish.
      if (env.body_case() == wire::Envelope::kLeave && env.leave().session() == session_ &&
          finish_unacked_.erase(w->rec.id)) {
        return {};
      }
      return {errorTo(peer, wire::Error::SHUTTING_DOWN, "training has finished")};
    }
    return {reject(peer, wire::Error::SHUTTING_DOWN, "finished", "training has finished")};
  }
  switch (env.body_case()) {
    case wire::Envelope::kJoin:
      if (!msg.payload.empty()) {
        return {reject(peer, wire::Error::MALFORMED, "unexpected_payload", "join has no payload")};
      }
      return handleJoin(peer, env.join());
    case wire::Envelope::kPush:
      return handlePush(peer, msg, wire_bytes, received_at);
    case wire::Envelope::kHeartbeat: {
      Worker* w = byPeer(peer);
      if (!w || env.heartbeat().session() != session_) {
        return {reject(peer, wire::Error::UNKNOWN_SESSION, "unknown_session", "unknown session")};
      }
      w->last_seen = clock_();
      return {};
    }
    case wire::Envelope::kLeave: {
      Worker* w = byPeer(peer);
      if (!w || env.leave().session() != session_) {
        return {reject(peer, wire::Error::UNKNOWN_SESSION, "unknown_session", "unknown session")};
      }
      spdlog::info("worker {} ({}) left: {}", w->rec.id, w->rec.name,
                   printable(env.leave().reason()));
      w->rec.alive = false;
      // The Leave is in, and so is all the worker sent before it: it may close its connection.
      Message m;
      m.envelope = makeEnvelope();
      m.envelope.mutable_ack()->set_leave(true);
      std::vector<Outgoing> out{send(*w, std::move(m))};
      // An acknowledged push stays in its round: it was computed on this round's model.
      reallocate();
      auto more = phase_ == Phase::kRunning && allAnswered() ? closeRound() : admitSittingOut();
      for (auto& o : more) out.push_back(std::move(o));
      return out;
    }
    default:
      return {reject(peer, wire::Error::MALFORMED, "unexpected_type",
                     "message type not accepted by the coordinator")};
  }
}

std::vector<Outgoing> CoordinatorCore::handleJoin(const std::string& peer, const wire::Join& join) {
  if (join.sample_count() == 0 || join.sample_count() > kMaxSamplesPerWorker) {
    return {reject(peer, wire::Error::MALFORMED, "bad_join",
                   "join with " + std::to_string(join.sample_count()) + " samples (1 to " +
                       std::to_string(kMaxSamplesPerWorker) + ")")};
  }
  if (std::string why = config::workerNameProblem(join.worker_name()); !why.empty()) {
    return {reject(peer, wire::Error::MALFORMED, "bad_join", "worker name " + why)};
  }
  // The welcome carries the whole model in one frame, and a round start or finish after a dense
  // step the model's floats and the update's header: a worker whose socket would drop them says
  // so now, and hears why, instead of waiting for frames that never arrive.
  if (join.max_message_bytes() != 0 && largestFrameBytes() > join.max_message_bytes()) {
    return {reject(peer, wire::Error::MESSAGE_LIMIT, "message_limit",
                   "the model's frames of up to " + std::to_string(largestFrameBytes()) +
                       " bytes do not fit this worker's max_message_bytes of " +
                       std::to_string(join.max_message_bytes()) + ": raise it to at least " +
                       std::to_string(largestFrameBytes()))};
  }
  // A worker that re-joins under the same name keeps its id (restart, network change).
  Worker* w = nullptr;
  for (auto& [id, cand] : workers_) {
    if (cand.rec.name == join.worker_name()) w = &cand;
  }
  // A name belongs to one live worker process: another process joining under it (two Pis
  // configured with the same name) is refused until the holder is marked gone, rather than
  // taking the id from it and being taken from in turn. The same process on a new connection
  // (a reconnect) keeps it.
  if (w && w->rec.alive && w->peer != peer && w->instance != 0 && join.instance() != 0 &&
      w->instance != join.instance()) {
    return {reject(peer, wire::Error::NAME_TAKEN, "name_taken",
                   "worker name '" + join.worker_name() +
                       "' is held by a live worker of another process; give each worker its own "
                       "name")};
  }
  // Workers that cut their shards from different partitions (another data set, data.shard.total
  // or data.partition) would train on overlapping shards or leave rows out: a join that
  // disagrees with a live worker is refused. Once none of them is live, a new partition may
  // begin (the one they trained is in the model).
  if (join.partition_fingerprint() != 0) {
    for (const auto& [id, other] : workers_) {
      if (!other.rec.alive || other.partition_fingerprint == 0 ||
          other.rec.name == join.worker_name() ||
          other.partition_fingerprint == join.partition_fingerprint()) {
        continue;
      }
      return {reject(peer, wire::Error::PARTITION_MISMATCH, "partition_mismatch",
                     "this worker's shard " + std::to_string(join.shard_index()) + " of " +
                         std::to_string(join.shard_total()) +
                         " is cut from another partition than live worker '" + other.rec.name +
                         "''s shard " + std::to_string(other.shard_index) + " of " +
                         std::to_string(other.shard_total) +
                         ": every worker needs the same data set, data.shard.total and "
                         "data.partition")};
    }
  }
  if (!w && workers_.size() >= settings_.max_workers) {
    return {reject(
        peer, wire::Error::TOO_MANY_WORKERS, "too_many_workers",
        "the coordinator keeps track of max_workers = " + std::to_string(settings_.max_workers) +
            " workers already; a gone one is forgotten after " +
            std::to_string(int(forgetAfterSeconds())) + " s")};
  }
  if (!w) {
    // Ids count up and wrap at 2^32 (a long-lived run, or a checkpoint that says so): one a
    // known worker holds is skipped, never shared.
    while (workers_.count(next_id_)) ++next_id_;
    uint32_t id = next_id_++;
    w = &workers_[id];
    w->rec.id = id;
    w->rec.name = join.worker_name();
    spdlog::info("worker {} joined as id {} with {} samples", join.worker_name(), id,
                 join.sample_count());
  } else {
    spdlog::info("worker {} re-joined as id {}", join.worker_name(), w->rec.id);
  }
  if (w->instance != join.instance()) {
    // Another process under this name (a restart, perhaps with another compressor): what the
    // last one's pushes cost is no measure of this one's.
    w->push_bytes = {};
    w->round_push.reset();
    w->rec.link = {};
    w->observed_push_seconds = 0.0;
  }
  w->peer = peer;
  w->instance = join.instance();
  w->acks_finish = join.acks_finish();
  w->samples = join.sample_count();
  w->partition_fingerprint = join.partition_fingerprint();
  w->shard_index = join.shard_index();
  w->shard_total = join.shard_total();
  if (join.has_link()) {
    // What the worker measured before (re-joining), planned with from here on; a model no link
    // could have is dropped and counted, as from a push (the last good one stays).
    if (const char* why = invalidLinkModel(join.link(), settings_.max_message_bytes)) {
      ++rejections_["bad_link_model"];
      spdlog::warn("worker {}: link model in its join dropped: {}", join.worker_name(), why);
    } else {
      w->rec.link = join.link();
    }
  }
  for (const auto& [id, other] : workers_) {
    if (&other != w && other.rec.alive && w->partition_fingerprint != 0 &&
        other.partition_fingerprint == w->partition_fingerprint &&
        other.shard_index == w->shard_index) {
      spdlog::warn("workers {} and {} both train on shard {} of {}: the same rows twice",
                   other.rec.name, w->rec.name, w->shard_index, w->shard_total);
    }
  }
  w->rec.alive = true;
  w->rec.pushed = false;
  clearReport(w->rec);
  w->refused = false;
  w->pending.reset();
  w->last_seen = clock_();
  reallocate();

  Message m;
  m.envelope = makeEnvelope();
  auto* wel = m.envelope.mutable_welcome();
  wel->set_worker_id(w->rec.id);
  wel->set_session(session_);
  wel->set_join_nonce(join.join_nonce());
  auto* spec = wel->mutable_model();
  spec->set_kind(model_->spec().kind);
  spec->set_features(model_->spec().features);
  spec->set_classes(model_->spec().classes);
  spec->set_hidden(model_->spec().hidden);
  spec->set_l2(model_->spec().l2);
  auto* tr = wel->mutable_training();
  tr->set_batch_size(settings_.training.batch_size);
  tr->set_local_steps(settings_.training.local_steps);
  tr->set_local_lr(settings_.training.local_lr);
  tr->set_seed(settings_.training.seed);
  wel->set_cap(w->rec.cap);
  wel->set_threshold(w->rec.threshold);
  wel->set_round(round_);
  wel->set_data_share(w->rec.share);
  wel->set_max_message_bytes(settings_.max_message_bytes);
  wel->set_heartbeat_seconds(settings_.heartbeat_seconds);
  wel->set_worker_patience_seconds(settings_.worker_patience_seconds);
  wel->set_round_deadline_seconds(settings_.round_deadline_seconds);
  wel->set_acks_leave(true);
  // A worker re-joining with a replica that is the model, or one round's update away from it
  // (a coordinator resumed from a pause; a worker whose push the last round went on without,
  // marked gone while the push crossed a slow uplink; one whose round start was lost with its
  // connection), is not sent the whole model again: on a slow downlink that is seconds for
  // every re-join.
  const uint64_t replica = join.replica_checksum();
  if (replica != 0 && join.replica_round() == round_ && replica == modelChecksum()) {
    wel->set_model_payload(wire::Welcome::REPLICA_CURRENT);
    spdlog::info("worker {} holds the model of round {}: welcomed without it", w->rec.name, round_);
  } else if (replica != 0 && join.replica_round() + 1 == round_ && !last_update_.empty() &&
             replica == previous_checksum_ &&
             last_update_.size() < params_.size() * sizeof(float)) {
    // (An update as large as the model, a dense step, is no saving: the model goes instead.)
    wel->set_model_payload(wire::Welcome::REPLICA_UPDATE);
    m.payload = last_update_;
    spdlog::info(
        "worker {} holds the model of round {}: welcomed with the update to round {} "
        "({} bytes, the model {})",
        w->rec.name, round_ - 1, round_, last_update_.size(), params_.size() * sizeof(float));
  } else {
    m.payload = floatsToBytes(params_);
  }
  // The welcome carries model_{round_}: the worker's replica is current.
  w->synced_round = int64_t(round_);
  std::vector<Outgoing> out;
  out.push_back(send(*w, std::move(m)));

  if (phase_ == Phase::kWaiting && resuming_ && resume_deadline_ == 0.0) {
    resume_deadline_ =
        clock_() + std::max(settings_.worker_patience_seconds, settings_.round_deadline_seconds);
  }
  if (phase_ == Phase::kWaiting &&
      (aliveWorkers() >= settings_.min_workers || (started_ && !resuming_ && aliveWorkers() > 0))) {
    phase_ = Phase::kRunning;
    if (!started_) start_time_ = clock_();
    if (resuming_) start_time_ = clock_() - resumed_elapsed_;
    started_ = true;
    resuming_ = false;
    auto starts = startRound();
    out.insert(out.end(), std::make_move_iterator(starts.begin()),
               std::make_move_iterator(starts.end()));
  } else if (phase_ == Phase::kRunning && admitToRound(*w)) {
    // Joins the round in progress: it gets the round start now (its model is current).
    out.push_back(sendRoundStart(*w));
  }
  return out;
}

std::vector<Outgoing> CoordinatorCore::admitSittingOut() {
  // Caps freed by members that left or were marked gone without pushing go to the workers
  // sitting the round out; without this a round whose members all went would wait for them
  // forever (the sitting-out worker is never asked to push).
  std::vector<Outgoing> out;
  if (phase_ != Phase::kRunning) return out;
  for (auto& [id, w] : workers_) {
    if (!w.rec.alive || w.in_round || w.rec.pushed) continue;
    if (admitToRound(w)) out.push_back(sendRoundStart(w));
  }
  return out;
}

bool CoordinatorCore::admitToRound(Worker& joiner) {
  // The others keep the caps they were handed for this round, planned for the members before
  // the join; the new plan applies to everyone from the next round on.
  joiner.in_round = true;
  joiner.round_cap = joiner.rec.cap;
  // A re-joining member's earlier push was dropped: its old cap is not spent.
  std::vector<const Worker*> members;
  for (const auto& [id, w] : workers_) {
    if (&w != &joiner && w.in_round && (w.rec.alive || w.pending)) members.push_back(&w);
  }
  // Nobody else holds a cap in the round (they left or went before pushing): the round is the
  // joiner's, under the plan just made for it, which keeps the budget or gives the one
  // coordinate every plan gives. Without this, a budget of less than one coordinate a worker
  // left the joiner sitting out a round with no one to close it.
  if (members.empty()) return true;
  if (plansSeconds() && joiner.planned_unit_seconds > 0.0) {
    // The caps planned in link seconds (links fitted): the joiner gets what the round's seconds
    // leave, everyone charged as the plan made at the join charges them (each worker's link and
    // price as measured now, whole packets when planned so: what a member's cap will take on the
    // wire). Without a fitted link cost-aware plans a volume, as below.
    const double seconds = planned_budget_.seconds_per_round;
    double spent = 0.0;
    for (const Worker* w : members) {
      spent += allocation::chargedSeconds(w->planned_unit_seconds, w->planned_packing, w->round_cap,
                                          seconds);
    }
    joiner.round_cap = allocation::capWithin(joiner.planned_unit_seconds, joiner.planned_packing,
                                             joiner.rec.cap, seconds - spent, seconds);
    return keepsSeat(joiner, "link seconds");
  }
  double spent = 0.0;
  for (const Worker* w : members) {
    spent += allocation::roundPushCost(w->planned_price, planned_budget_, w->round_cap);
  }
  const double limit =
      allocation::roundLimit(members.size() + 1, uint32_t(params_.size()), planned_budget_);
  joiner.round_cap = allocation::capWithinRound(joiner.planned_price, planned_budget_,
                                                joiner.rec.cap, spent, limit);
  return keepsSeat(joiner, "budget");
}

bool CoordinatorCore::keepsSeat(Worker& joiner, const char* budget) {
  if (joiner.round_cap > 0) return true;
  joiner.in_round = false;
  spdlog::info("worker {} ({}) sits out round {}, its {} spent: it starts with the next",
               joiner.rec.id, joiner.rec.name, round_, budget);
  return false;
}

void CoordinatorCore::reallocate() {
  std::vector<Worker*> alive;
  double total = 0.0;  // sums of up to 2^40 samples a worker: no overflow, shares in [0, 1]
  for (auto& [id, w] : workers_) {
    if (w.rec.alive) {
      alive.push_back(&w);
      total += double(w.samples);
    }
  }
  if (alive.empty() || !(total > 0.0)) return;
  std::vector<allocation::WorkerLoad> loads;
  for (Worker* w : alive) {
    allocation::WorkerLoad l = loadOf(*w);
    l.share = double(w->samples) / total;
    loads.push_back(l);
  }
  const allocation::Budget budget = pricedBudget();
  auto plan = allocator_->allocate(loads, uint32_t(params_.size()), budget);
  planned_budget_ = budget;
  // What the plan charges each worker of a link-seconds budget (the allocator's own pricing).
  allocation::LinkCosts links;
  if (plansSeconds()) links = allocation::linkCosts(loads, budget);
  for (size_t i = 0; i < alive.size(); ++i) {
    alive[i]->planned_seconds_per_packet = fittedSecondsPerPacket(alive[i]->rec.link);
    alive[i]->planned_unit_seconds = links.known ? links.per_unit[i] : 0.0;
    alive[i]->planned_packing = links.known ? links.packing[i] : allocation::Packing{};
    alive[i]->planned_price = allocation::pushPrice(loads[i], budget);
    alive[i]->rec.share = loads[i].share;
    alive[i]->rec.cap = i < plan.caps.size() ? plan.caps[i] : uint32_t(params_.size());
    alive[i]->rec.threshold = i < plan.thresholds.size() ? plan.thresholds[i] : 0.0;
  }
  rounds_since_alloc_ = 0;
}

allocation::WorkerLoad CoordinatorCore::loadOf(const Worker& w) const {
  allocation::WorkerLoad l;
  priceLoad(w, l);
  // The allocator prices packets of the budget's size; a worker fits b per packet of its own
  // (link.packet_bytes), so b is rescaled to the budget's packet by bytes.
  const auto& link = w.rec.link;
  const double own_packet = link.packet_bytes() > 0 ? double(link.packet_bytes()) : 0.0;
  l.seconds_per_packet = own_packet > 0.0
                             ? link.b_seconds_per_packet() *
                                   double(settings_.allocation.budget.packet_bytes) / own_packet
                             : link.b_seconds_per_packet();
  l.seconds_fixed = link.a_seconds();
  return l;
}

bool CoordinatorCore::plansSeconds() const {
  const auto& allocation = settings_.allocation;
  return allocation.method == "cost-aware" && allocation.budget.seconds_per_round > 0.0;
}

allocation::Budget CoordinatorCore::pricedBudget() const {
  allocation::Budget budget = settings_.allocation.budget;
  if (settings_.allocation.measure_push_bytes && push_bytes_.known) {
    budget.bytes_per_coordinate = push_bytes_.per_coordinate;
    budget.bytes_per_push = push_bytes_.fixed;
  }
  return budget;
}

void CoordinatorCore::priceLoad(const Worker& w, allocation::WorkerLoad& load) const {
  // A configured bytes_per_coordinate is the price of everyone's coordinates.
  if (settings_.allocation.measure_push_bytes && w.push_bytes.known) {
    load.bytes_per_coordinate = w.push_bytes.per_coordinate;
    load.bytes_per_push = w.push_bytes.fixed;
  }
}

void CoordinatorCore::PushBytes::fold(double round_fixed, double round_per_coordinate) {
  constexpr double kWeight = 0.25;
  fixed = known ? (1 - kWeight) * fixed + kWeight * round_fixed : round_fixed;
  per_coordinate = known ? (1 - kWeight) * per_coordinate + kWeight * round_per_coordinate
                         : round_per_coordinate;
  known = true;
}

bool CoordinatorCore::planInputsMoved() {
  const auto& allocation = settings_.allocation;
  const auto& budget = allocation.budget;
  bool moved = link_moved_;
  link_moved_ = false;
  PushSample round;  // the sums over the round's pushes
  uint64_t pushes = 0;
  for (auto& [id, w] : workers_) {
    if (!w.round_push) continue;
    const PushSample sample = *w.round_push;
    w.round_push.reset();
    round.fixed += sample.fixed;
    round.coordinate_bytes += sample.coordinate_bytes;
    round.coordinates += sample.coordinates;
    ++pushes;
    if (sample.coordinates > 0.0) {
      w.push_bytes.fold(sample.fixed, sample.coordinate_bytes / sample.coordinates);
    }
  }
  if (pushes > 0 && round.coordinates > 0.0) {
    push_bytes_.fold(round.fixed / double(pushes), round.coordinate_bytes / round.coordinates);
  }
  // Push bytes only matter to a budget in bytes and to cost-aware's link seconds (budget,
  // deadline, round time); they moved when the caps now planned would cost 10% more or less
  // than planned.
  const bool priced_in_bytes = budget.bytes_per_round > 0.0 ||
                               (allocation.method == "cost-aware" &&
                                (budget.seconds_per_round > 0.0 || budget.deadline_seconds > 0.0 ||
                                 budget.round_overhead_seconds > 0.0));
  if (allocation.measure_push_bytes && push_bytes_.known && priced_in_bytes) {
    const allocation::Budget priced = pricedBudget();
    double planned = 0.0, now = 0.0;
    for (const auto& [id, w] : workers_) {
      if (!w.rec.alive) continue;
      allocation::WorkerLoad load;
      priceLoad(w, load);
      const allocation::PushPrice price = allocation::pushPrice(load, priced);
      planned += w.planned_price.per_push + w.planned_price.per_coordinate * w.rec.cap;
      now += price.per_push + price.per_coordinate * w.rec.cap;
    }
    if (planned > 0.0 && std::abs(now / planned - 1.0) > kReplanPushBytesChange) moved = true;
  }
  return moved;
}

Message CoordinatorCore::roundStartFor(const Worker& w) const {
  Message m;
  m.envelope = makeEnvelope();
  auto* rs = m.envelope.mutable_round_start();
  rs->set_round(round_);
  rs->set_cap(w.round_cap);
  rs->set_threshold(w.rec.threshold);
  rs->set_data_share(w.rec.share);
  rs->set_learning_rate(optimizer_.learningRate(round_));
  rs->set_session(session_);
  if (phase_ == Phase::kRunning)
    rs->set_deadline_seconds_left(std::max(0.0, round_deadline_ - clock_()));
  if (w.synced_round == int64_t(round_)) {
    // Already current: nothing to apply.
  } else if (w.synced_round + 1 == int64_t(round_) && !last_update_.empty()) {
    m.payload = last_update_;
  } else {
    rs->set_full_model(true);
    m.payload = floatsToBytes(params_);
  }
  return m;
}

std::vector<Outgoing> CoordinatorCore::startRound() {
  round_deadline_ = clock_() + settings_.round_deadline_seconds;
  std::vector<Outgoing> out;
  // A round restarted after every worker went (Waiting, then a join) keeps the pushes that were
  // acknowledged in it: the caps handed out now get what the budget leaves after those.
  bool carried = false;
  for (auto& [id, w] : workers_) {
    clearReport(w.rec);  // a gone worker's too: a row reports this round's pushes only
    carried = carried || (!w.rec.alive && w.pending);
    // A gone worker's push was aggregated when its round closed: it has none in this one (else
    // it would never be forgotten).
    if (!w.rec.alive && !w.pending) w.rec.pushed = false;
    if (w.rec.alive) w.in_round = false;
  }
  for (auto& [id, w] : workers_) {
    if (!w.rec.alive) continue;
    w.rec.pushed = false;
    w.refused = false;
    w.pending.reset();
    if (carried) {
      if (!admitToRound(w)) continue;
    } else {
      w.in_round = true;
      w.round_cap = w.rec.cap;
    }
    out.push_back(sendRoundStart(w));
    w.synced_round = int64_t(round_);
  }
  return out;
}

std::vector<Outgoing> CoordinatorCore::handlePush(const std::string& peer, const Message& msg,
                                                  size_t wire_bytes, double received_at) {
  const auto& push = msg.envelope.push();
  Worker* w = byPeer(peer);
  if (!w || push.session() != session_) {
    // Named as a push's, so that the worker times it (the refusal leaves as it arrives).
    Outgoing refused =
        reject(peer, wire::Error::UNKNOWN_SESSION, "unknown_session", "unknown session");
    refused.message.envelope.mutable_error()->set_round(push.round());
    refused.message.envelope.mutable_error()->set_about_push(!push.probe());
    refused.message.envelope.mutable_error()->set_session(session_);
    return {std::move(refused)};
  }
  if (push.worker_id() != w->rec.id) {
    return {reject(peer, wire::Error::MALFORMED, "wrong_worker_id", "worker id does not match")};
  }
  w->last_seen = clock_();
  // Sent after the ack: a notice that the push's link model was dropped.
  std::optional<Outgoing> notice;
  if (push.has_link()) {
    // The allocator plans with it: a model no link could have is dropped (the last good one
    // stays) and counted, and the worker is told; the gradient beside it is still good work.
    if (const char* why = invalidLinkModel(push.link(), settings_.max_message_bytes)) {
      notice = reject(peer, wire::Error::MALFORMED, "bad_link_model",
                      std::string("link model dropped: ") + why);
    } else {
      w->rec.link = push.link();
      // Only cost-aware plans with the links: a first fit, or b moved by a quarter since the
      // plan, re-plans at the round's close (joins alone would plan with the models of the
      // calibration train, or with none).
      if (settings_.allocation.method == "cost-aware") {
        const double was = w->planned_seconds_per_packet;
        const double b = fittedSecondsPerPacket(push.link());
        if ((was > 0.0) != (b > 0.0) || (was > 0.0 && std::abs(b / was - 1.0) > kReplanLinkChange))
          link_moved_ = true;
      }
    }
  }
  auto withNotice = [&](std::vector<Outgoing> out) {
    if (notice) out.push_back(std::move(*notice));
    return out;
  };

  auto ack = [&](bool probe) {
    Message m;
    m.envelope = makeEnvelope();
    auto* a = m.envelope.mutable_ack();
    a->set_round(push.round());
    a->set_bytes_received(wire_bytes);
    a->set_probe(probe);
    a->set_probe_id(push.probe_id());
    stampAckHold(m, received_at, clock_());
    return send(*w, std::move(m));
  };

  if (push.probe()) {
    // Calibration traffic: measured by the worker, acknowledged and discarded here. It is
    // upload traffic all the same, so it counts against the bytes sent.
    w->rec.upload_bytes += wire_bytes;
    upload_bytes_ += wire_bytes;
    return withNotice({ack(true)});
  }
  if (phase_ != Phase::kRunning || push.round() != round_ || !w->in_round) {
    // A worker sitting out the round (it joined with the round's budget spent) has no cap in it.
    const bool sits_out = phase_ == Phase::kRunning && push.round() == round_;
    if (!sits_out) ++late_pushes_;
    Outgoing refused =
        sits_out ? reject(peer, wire::Error::BAD_ROUND, "not_in_round",
                          "push for round " + std::to_string(push.round()) +
                              ", which this worker takes no part in: it starts with the next")
                 : reject(peer, wire::Error::BAD_ROUND, "late_or_future_round",
                          "push for round " + std::to_string(push.round()) + ", current round is " +
                              std::to_string(round_));
    refused.message.envelope.mutable_error()->set_round(push.round());
    refused.message.envelope.mutable_error()->set_about_push(true);
    return withNotice({std::move(refused)});
  }
  if (w->rec.pushed) {
    // Idempotent: a duplicate of an accepted push is acknowledged again but not applied twice.
    ++rejections_["duplicate"];
    return withNotice({ack(false)});
  }
  if (!std::isfinite(push.local_loss())) {
    return withNotice(
        refusePush(*w, wire::Error::BAD_PAYLOAD, "non_finite_loss", "local loss is not finite"));
  }
  compression::DecodeLimits limits;
  limits.expected_dim = uint32_t(params_.size());
  limits.max_dim = uint32_t(params_.size());
  limits.max_bytes = settings_.max_message_bytes;
  auto decoded = compression::decode(msg.payload, limits);
  if (!decoded.value) {
    return withNotice(refusePush(*w, wire::Error::BAD_PAYLOAD, "bad_payload",
                                 "gradient rejected: " + decoded.error));
  }
  w->pending = std::move(*decoded.value);
  // What a push costs besides its coordinates: the envelope, the frames and the codec's header.
  const size_t coordinate_bytes = msg.payload.size() - decoded.header_bytes;
  w->round_push = PushSample{double(wire_bytes) - double(std::min(wire_bytes, coordinate_bytes)),
                             double(coordinate_bytes), double(w->pending->nonZeros())};
  w->loss = push.local_loss();
  w->rec.pushed = true;
  if (w->round_sent_at >= 0.0)
    w->observed_push_seconds = std::max(0.0, received_at - w->round_sent_at);
  recordReport(*w, push);
  w->rec.upload_bytes += wire_bytes;
  upload_bytes_ += wire_bytes;
  full_bytes_ += params_.size() * sizeof(float);

  std::vector<Outgoing> out;
  out.push_back(ack(false));
  if (notice) out.push_back(std::move(*notice));
  if (allAnswered()) {
    auto closed = closeRound();
    out.insert(out.end(), std::make_move_iterator(closed.begin()),
               std::make_move_iterator(closed.end()));
    // The ack goes out first, but only after the round's work: its hold covers that work, or
    // the worker would count it as link time.
    stampAckHold(out.front().message, received_at, clock_());
  }
  return out;
}

std::vector<Outgoing> CoordinatorCore::refusePush(Worker& w, wire::Error::Code code,
                                                  const std::string& reason,
                                                  const std::string& text) {
  // The worker waits for the next round start and does not resend on its own: it is asked
  // again at the deadline unless the round can close without it.
  w.refused = true;
  std::vector<Outgoing> out;
  out.push_back(reject(w.peer, code, reason, text));
  // Named so that the worker takes back what the push carried (error feedback).
  out.back().message.envelope.mutable_error()->set_round(round_);
  out.back().message.envelope.mutable_error()->set_about_push(true);
  if (allAnswered()) {
    auto closed = closeRound();
    out.insert(out.end(), std::make_move_iterator(closed.begin()),
               std::make_move_iterator(closed.end()));
  }
  return out;
}

void CoordinatorCore::recordReport(Worker& w, const wire::Push& push) {
  // A level beyond the model's dimension, a cost or step that is not a finite number >= 0 or an
  // improvement that is not finite is no report a tuner makes (a negative improvement is: the
  // least harm, where the step overshoots at every level). The gradient itself decoded fine, so
  // it is applied regardless.
  const bool usable = push.level() <= params_.size() && std::isfinite(push.predicted_cost()) &&
                      push.predicted_cost() >= 0.0 && std::isfinite(push.predicted_improvement()) &&
                      std::isfinite(push.predicted_step()) && push.predicted_step() >= 0.0;
  if (!usable) {
    ++bad_reports_;
    spdlog::debug(
        "worker {} ({}): unusable tuner report with its push (level {}, cost {}, "
        "improvement {}, step {}): recorded as zeros",
        w.rec.id, w.rec.name, push.level(), push.predicted_cost(), push.predicted_improvement(),
        push.predicted_step());
    clearReport(w.rec);
    return;
  }
  w.rec.level = push.level();
  w.rec.predicted_cost = push.predicted_cost();
  w.rec.predicted_improvement = push.predicted_improvement();
  w.rec.predicted_step = push.predicted_step();
}

void CoordinatorCore::clearReport(WorkerRecord& rec) {
  rec.level = 0;
  rec.predicted_cost = 0.0;
  rec.predicted_improvement = 0.0;
  rec.predicted_step = 0.0;
}

void stampAckHold(Message& m, double received_at, double now) {
  if (!m.envelope.has_ack()) return;
  m.envelope.mutable_ack()->set_hold_seconds(std::max(0.0, now - received_at));
}

bool CoordinatorCore::allPushed() const {
  bool any = false;
  for (const auto& [id, w] : workers_) {
    if (!w.rec.alive || !w.in_round) continue;
    if (!w.rec.pushed) return false;
    any = true;
  }
  return any;
}

bool CoordinatorCore::allAnswered() const {
  bool any = false;
  for (const auto& [id, w] : workers_) {
    if (!w.rec.alive || !w.in_round) continue;
    if (!w.rec.pushed && !w.refused) return false;
    any = any || w.rec.pushed;
  }
  return any && (allPushed() || pushedShare() >= settings_.quorum_share);
}

double CoordinatorCore::pushedShare() const {
  // Over the round's members: a worker sitting out the round (it joined with the budget spent)
  // holds a share of the next plan but cannot push in this round.
  double pushed = 0.0, members = 0.0;
  bool sitting_out = false;
  for (const auto& [id, w] : workers_) {
    if (!w.rec.alive) continue;
    if (!w.in_round) {
      sitting_out = true;
      continue;
    }
    members += w.rec.share;
    if (w.rec.pushed) pushed += w.rec.share;
  }
  if (!sitting_out) return pushed;  // the shares of the alive workers sum to one
  return members > 0.0 ? pushed / members : 0.0;
}

std::vector<Outgoing> CoordinatorCore::closeRound() {
  // Aggregate in worker-id order so the result does not depend on arrival order.
  // Weighted by samples over the workers that pushed: their data shares, renormalised, also for
  // a worker that left or was marked gone after its push was acknowledged (its push counts, and
  // its share is no longer among the members').
  double total_samples = 0.0;
  double loss = 0.0;
  uint32_t participants = 0;
  for (auto& [id, w] : workers_) {
    if (w.pending) {
      total_samples += double(w.samples);
      loss += double(w.samples) * w.loss;
      ++participants;
    }
  }
  std::vector<float> aggregate(params_.size(), 0.0f);
  for (auto& [id, w] : workers_) {
    if (!w.pending) continue;
    compression::addScaled(*w.pending, float(double(w.samples) / total_samples), aggregate);
    w.pending.reset();
  }
  std::vector<float> delta(params_.size(), 0.0f);
  // Pushes of finite but huge values can still overflow the sum, the momentum or the parameters.
  // Such a step is not taken: the model and the momentum stay as they were (the round's update
  // is empty), and it is counted, so a diverging run neither corrupts the model nor ends the
  // daemon and the last checkpoint stays one a restart can use.
  std::vector<float> velocity_before = optimizer_.velocity();
  optimizer_.step(aggregate, round_, delta);
  bool finite_step = true;
  for (size_t j = 0; j < delta.size() && finite_step; ++j)
    finite_step = std::isfinite(delta[j]) && std::isfinite(params_[j] + delta[j]);
  if (!finite_step) {
    ++steps_refused_;
    spdlog::warn("round {}: the aggregated step overflows the model; not taken", round_);
    optimizer_.setVelocity(std::move(velocity_before));
    std::fill(delta.begin(), delta.end(), 0.0f);
  }
  compression::SparseGradient update;
  update.dim = uint32_t(params_.size());
  size_t nnz = 0;
  for (float d : delta) nnz += d != 0.0f ? 1 : 0;
  if (nnz * 2 < params_.size()) {
    for (uint32_t j = 0; j < delta.size(); ++j) {
      if (delta[j] != 0.0f) {
        update.indices.push_back(j);
        update.values.push_back(delta[j]);
      }
    }
  } else {
    update.values = delta;
  }
  // A worker may re-join one round behind: one this round went on without (marked gone or left
  // meanwhile, its push late), or one whose push counted and whose next round start was lost
  // with its connection. One pass over the parameters a round (about 10 ms per million on a
  // desktop core; none when a re-join has already computed it).
  previous_checksum_ = modelChecksum();
  for (size_t j = 0; j < params_.size(); ++j) params_[j] += delta[j];
  model_checksum_.reset();
  last_update_ = compression::encodeUpdate(update);

  RoundRecord rec;
  rec.round = round_;
  rec.time_s = clock_() - start_time_;
  rec.train_loss = total_samples > 0 ? loss / total_samples : 0.0;
  rec.participants = participants;
  ++round_;
  ++rounds_since_alloc_;
  bool last = round_ >= settings_.max_rounds;
  if (test_ && (round_ % settings_.eval_every == 0 || last)) {
    last_accuracy_ = evaluate();
    accuracy_known_ = true;
    rec.evaluated = true;
  }
  rec.test_accuracy = last_accuracy_;
  rec.accuracy_measured = accuracy_known_;
  rec.upload_bytes = upload_bytes_;
  rec.download_bytes = download_bytes_;
  rec.full_bytes = full_bytes_;
  rec.late_pushes = late_pushes_;
  rec.rejected = rejectedTotal();
  for (const auto& [id, w] : workers_) rec.workers.push_back(w.rec);
  bool reached =
      settings_.target_accuracy > 0 && rec.evaluated && last_accuracy_ >= settings_.target_accuracy;
  if (last || reached ||
      (settings_.checkpoint.every > 0 && round_ % settings_.checkpoint.every == 0)) {
    checkpoint_due_ = true;
  }
  if (planInputsMoved()) {
    reallocate();
  } else if (settings_.allocation.reallocate_every > 0 &&
             rounds_since_alloc_ >= settings_.allocation.reallocate_every) {
    reallocate();
  }
  if (last || reached) {
    // The final row is complete: evaluate if the schedule skipped this round.
    if (test_ && !rec.evaluated) {
      last_accuracy_ = evaluate();
      accuracy_known_ = true;
      rec.test_accuracy = last_accuracy_;
      rec.accuracy_measured = accuracy_known_;
      rec.evaluated = true;
    }
    last_record_ = rec;
    if (on_round) on_round(rec);
    return finishAll();
  }
  last_record_ = rec;
  if (on_round) on_round(rec);
  return startRound();
}

std::vector<Outgoing> CoordinatorCore::finishAll() {
  phase_ = Phase::kDone;
  std::vector<Outgoing> out;
  for (auto& [id, w] : workers_) {
    // A worker marked gone but not forgotten may still be there (a push slower than its
    // patience, a link back up): told too, or it would ask a coordinator that is gone for ever.
    // It is not waited for, and gets no last step (its replica is not the model's).
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_finish()->set_round(round_);
    if (accuracy_known_) m.envelope.mutable_finish()->set_test_accuracy(last_accuracy_);
    // The last step, so every replica ends on the final model.
    if (w.rec.alive && w.synced_round + 1 == int64_t(round_)) m.payload = last_update_;
    out.push_back(send(w, std::move(m)));
    told_to_finish_.insert(id);
    if (w.rec.alive && w.acks_finish) finish_unacked_.insert(id);
  }
  return out;
}

double CoordinatorCore::evaluate() {
  const size_t rows = eval_chunk_rows_ > 0 ? eval_chunk_rows_ : ml::chunkRows(params_.size());
  return ml::chunkedAccuracy(*model_, params_, *test_, rows, eval_chunk_, between_chunks_);
}

uint64_t CoordinatorCore::modelChecksum() {
  if (!model_checksum_) model_checksum_ = checksum(params_);
  return *model_checksum_;
}

std::vector<Outgoing> CoordinatorCore::stop() {
  if (phase_ == Phase::kDone) return {};
  return finishAll();
}

std::vector<Outgoing> CoordinatorCore::onTick() {
  std::vector<Outgoing> out;
  if (phase_ == Phase::kDone) return out;
  const double now = clock_();
  bool membership_changed = false;
  // A worker gone for long is forgotten (its entry, counters and id), so that the table, every
  // round's record and the checkpoint do not grow with each name ever seen. One that returns
  // within the horizon keeps its id; later it joins as new. A push still in its round stays.
  const double forget_after = forgetAfterSeconds();
  std::erase_if(workers_, [&](const auto& entry) {
    const Worker& w = entry.second;
    return !w.rec.alive && !w.rec.pushed && !w.pending && now - w.last_seen > forget_after;
  });
  for (auto& [id, w] : workers_) {
    if (!w.rec.alive) continue;
    if (now >= w.last_seen + patienceFor(w)) {
      spdlog::warn("worker {} ({}) silent for {:.1f} s: marked gone", id, w.rec.name,
                   now - w.last_seen);
      w.rec.alive = false;
      // An acknowledged push stays in its round, as for a worker that leaves.
      membership_changed = true;
      continue;
    }
    if (now >= w.last_sent + settings_.heartbeat_seconds) {
      Message m;
      m.envelope = makeEnvelope();
      auto* hb = m.envelope.mutable_heartbeat();
      hb->set_session(session_);
      hb->set_worker_id(id);
      hb->set_round(round_);
      out.push_back(send(w, std::move(m)));
    }
  }
  if (membership_changed) {
    reallocate();
    auto admitted = admitSittingOut();
    out.insert(out.end(), std::make_move_iterator(admitted.begin()),
               std::make_move_iterator(admitted.end()));
  }
  if (phase_ == Phase::kWaiting && resuming_ && aliveWorkers() > 0 && now >= resume_deadline_) {
    spdlog::info("resuming round {} with {} of the known workers back", round_, aliveWorkers());
    phase_ = Phase::kRunning;
    start_time_ = now - resumed_elapsed_;  // time_s goes on from the checkpoint's
    started_ = true;
    resuming_ = false;
    auto starts = startRound();
    out.insert(out.end(), std::make_move_iterator(starts.begin()),
               std::make_move_iterator(starts.end()));
    return out;
  }
  if (phase_ != Phase::kRunning) return out;
  bool any_pushed = false;
  for (const auto& [id, w] : workers_) any_pushed = any_pushed || w.pending.has_value();
  if (allAnswered() ||
      (now >= round_deadline_ && any_pushed && pushedShare() >= settings_.quorum_share)) {
    auto closed = closeRound();
    out.insert(out.end(), std::make_move_iterator(closed.begin()),
               std::make_move_iterator(closed.end()));
  } else if (now >= round_deadline_) {
    // Nobody (or too little data) pushed in time: keep the round open for another period, and
    // ask each worker whose push was refused for this round again (a worker never resends on
    // its own, so with one worker, or every push refused, the round would never close).
    round_deadline_ = now + settings_.round_deadline_seconds;
    for (auto& [id, w] : workers_) {
      if (!w.rec.alive || !w.refused || w.rec.pushed) continue;
      w.refused = false;
      ++reasked_;
      spdlog::warn("round {}: asking worker {} ({}) again after its push was refused", round_, id,
                   w.rec.name);
      out.push_back(sendRoundStart(w));
    }
    if (aliveWorkers() == 0) phase_ = Phase::kWaiting;
  }
  return out;
}

double CoordinatorCore::nextWakeup() const {
  double t = clock_() + settings_.heartbeat_seconds;
  if (phase_ == Phase::kRunning) t = std::min(t, round_deadline_);
  // The resume grace matters only while a worker is back (onTick resumes with those): with
  // nobody, a passed deadline would be a wake-up in the past, a busy loop.
  if (phase_ == Phase::kWaiting && resuming_ && resume_deadline_ > 0.0 && aliveWorkers() > 0) {
    t = std::min(t, resume_deadline_);
  }
  for (const auto& [id, w] : workers_) {
    if (!w.rec.alive) continue;
    t = std::min(t, w.last_seen + patienceFor(w));
    t = std::min(t, w.last_sent + settings_.heartbeat_seconds);
  }
  return t;
}

namespace {

constexpr uint32_t kCheckpointFormat = 1;

std::string floatBytes(const std::vector<float>& v) {
  auto b = floatsToBytes(v);
  return std::string(b.begin(), b.end());
}

// Parses fp32 bytes into exactly n finite values; a checkpoint holding anything else is damaged.
std::vector<float> checkpointFloats(const std::string& bytes, size_t n, const char* what) {
  std::vector<float> out(n);
  std::span<const uint8_t> raw(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!bytesToFloats(raw, out)) {
    throw std::runtime_error(std::string("checkpoint ") + what + " has " +
                             std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(n * sizeof(float)));
  }
  for (float x : out) {
    if (!std::isfinite(x)) {
      throw std::runtime_error(std::string("checkpoint ") + what + " holds a non-finite value");
    }
  }
  return out;
}

void putPrice(double fixed, double per_coordinate, wire::PushPrice* out) {
  out->set_fixed_bytes(fixed);
  out->set_bytes_per_coordinate(per_coordinate);
}

// A measured push price from a checkpoint: what a push ever costs, finite, and some bytes per
// coordinate (every allocator divides by them).
void checkPrice(const wire::PushPrice& p, const std::string& whose) {
  if (!std::isfinite(p.fixed_bytes()) || p.fixed_bytes() < 0.0 ||
      !std::isfinite(p.bytes_per_coordinate()) || !(p.bytes_per_coordinate() > 0.0)) {
    throw std::runtime_error("checkpoint holds an invalid push price for " + whose + " (" +
                             std::to_string(p.fixed_bytes()) + " bytes a push, " +
                             std::to_string(p.bytes_per_coordinate()) + " a coordinate)");
  }
}

}  // namespace

std::string CoordinatorCore::checkpoint() const {
  wire::Checkpoint c;
  c.set_format(kCheckpointFormat);
  c.set_session(session_);
  c.set_round(round_);
  auto* spec = c.mutable_model();
  spec->set_kind(model_->spec().kind);
  spec->set_features(model_->spec().features);
  spec->set_classes(model_->spec().classes);
  spec->set_hidden(model_->spec().hidden);
  spec->set_l2(model_->spec().l2);
  c.set_training_seed(settings_.training.seed);
  c.set_parameters(floatBytes(params_));
  c.set_velocity(floatBytes(optimizer_.velocity()));
  c.set_parameters_checksum(tern::checksum(params_));
  c.set_velocity_checksum(tern::checksum(optimizer_.velocity()));
  c.set_next_worker_id(next_id_);
  for (const auto& [id, w] : workers_) {
    auto* cw = c.add_workers();
    cw->set_id(id);
    cw->set_name(w.rec.name);
    cw->set_samples(w.samples);
    cw->set_cap(w.rec.cap);
    cw->set_threshold(w.rec.threshold);
    cw->set_share(w.rec.share);
    *cw->mutable_link() = w.rec.link;
    cw->set_upload_bytes(w.rec.upload_bytes);
    cw->set_download_bytes(w.rec.download_bytes);
    cw->set_instance(w.instance);
    if (w.push_bytes.known) {
      putPrice(w.push_bytes.fixed, w.push_bytes.per_coordinate, cw->mutable_push_price());
    }
  }
  if (push_bytes_.known) {
    putPrice(push_bytes_.fixed, push_bytes_.per_coordinate, c.mutable_push_price());
  }
  c.set_allocation_method(settings_.allocation.method);
  c.set_rounds_since_alloc(rounds_since_alloc_);
  c.set_upload_bytes(upload_bytes_);
  c.set_download_bytes(download_bytes_);
  c.set_full_bytes(full_bytes_);
  c.set_late_pushes(late_pushes_);
  c.set_pushes_asked_again(reasked_);
  c.set_push_reports_unusable(bad_reports_);
  c.set_steps_refused(steps_refused_);
  for (const auto& [reason, n] : rejections_) {
    auto* r = c.add_rejections();
    r->set_reason(reason);
    r->set_count(n);
  }
  c.set_last_accuracy(last_accuracy_);
  c.set_accuracy_known(accuracy_known_);
  c.set_last_train_loss(last_record_.train_loss);
  // A checkpoint taken while a restored run waits for its workers keeps the restored time: the
  // wait is not training.
  c.set_elapsed_seconds(resuming_ ? resumed_elapsed_ : started_ ? clock_() - start_time_ : 0.0);
  c.set_finished(phase_ == Phase::kDone);
  return c.SerializeAsString();
}

std::unique_ptr<CoordinatorCore> CoordinatorCore::restore(
    const config::CoordinatorSettings& settings, std::unique_ptr<ml::Model> model,
    std::shared_ptr<const ml::Dataset> test_data, uint64_t session, Clock clock,
    const std::string& checkpoint_bytes) {
  wire::Checkpoint c;
  // An empty file parses as a message with every field unset: say what it is.
  if (checkpoint_bytes.empty())
    throw std::runtime_error("checkpoint is empty (damaged; remove it to start again)");
  if (!c.ParseFromString(checkpoint_bytes)) throw std::runtime_error("checkpoint does not parse");
  if (c.format() != kCheckpointFormat) {
    throw std::runtime_error("checkpoint format " + std::to_string(c.format()) +
                             " is not supported (expected " + std::to_string(kCheckpointFormat) +
                             ")");
  }
  const auto& want = model->spec();
  const auto& got = c.model();
  // The hidden width only shapes an MLP; the linear models ignore it.
  if (got.kind() != want.kind || got.features() != want.features || got.classes() != want.classes ||
      (want.kind == "mlp" && got.hidden() != want.hidden)) {
    throw std::runtime_error(
        "checkpoint holds a " + got.kind() + " model with " + std::to_string(got.features()) +
        " features and " + std::to_string(got.classes()) + " classes; the configuration asks for " +
        want.kind + " with " + std::to_string(want.features) + " and " +
        std::to_string(want.classes));
  }
  auto core = std::make_unique<CoordinatorCore>(settings, std::move(model), std::move(test_data),
                                                session, std::move(clock));
  const size_t n = core->params_.size();
  core->params_ = checkpointFloats(c.parameters(), n, "parameters");
  core->model_checksum_ = tern::checksum(core->params_);
  if (*core->model_checksum_ != c.parameters_checksum()) {
    throw std::runtime_error("checkpoint parameters do not match their checksum");
  }
  std::vector<float> velocity = checkpointFloats(c.velocity(), n, "velocity");
  if (c.has_velocity_checksum() && tern::checksum(velocity) != c.velocity_checksum()) {
    throw std::runtime_error("checkpoint velocity does not match its checksum");
  }
  core->optimizer_.setVelocity(std::move(velocity));
  core->round_ = c.round();
  for (const auto& cw : c.workers()) {
    if (cw.id() >= c.next_worker_id() || core->workers_.count(cw.id()) || cw.name().empty() ||
        cw.samples() == 0) {
      throw std::runtime_error("checkpoint has an invalid or repeated worker entry (id " +
                               std::to_string(cw.id()) + ")");
    }
    // A name a join would refuse (control characters, too long) would reach the logs, the
    // status table and /metrics as it is: that worker is forgotten (it joins afresh under a
    // name it may have), the rest of the run restored.
    if (std::string why = config::workerNameProblem(cw.name()); !why.empty()) {
      spdlog::warn(
          "checkpoint names worker {} {}, which a join would refuse (the name {}): "
          "forgotten",
          cw.id(), printable(cw.name()), why);
      continue;
    }
    for (const auto& [id, other] : core->workers_) {
      if (other.rec.name == cw.name()) {
        throw std::runtime_error("checkpoint names worker " + printable(cw.name()) + " twice");
      }
    }
    Worker& w = core->workers_[cw.id()];
    w.rec.id = cw.id();
    w.rec.name = cw.name();
    w.rec.cap = cw.cap();
    w.rec.threshold = cw.threshold();
    w.rec.share = cw.share();
    // A link model no link could have (a damaged checkpoint) would price this worker's pushes
    // until its next one: it starts unfitted instead, as the live path drops one.
    if (const char* why = invalidLinkModel(cw.link(), settings.max_message_bytes)) {
      spdlog::warn("checkpoint's link model of worker {} dropped: {}", printable(cw.name()), why);
    } else {
      w.rec.link = cw.link();
    }
    w.rec.upload_bytes = cw.upload_bytes();
    w.rec.download_bytes = cw.download_bytes();
    // Not alive: its ROUTER identity belonged to the previous process. It re-joins by name, and
    // is remembered from now on, however long the coordinator was down.
    w.rec.alive = false;
    w.last_seen = core->clock_();
    w.samples = cw.samples();
    // The same process re-joining keeps what its pushes were measured to cost; another one
    // under the name starts afresh (handleJoin compares the instances).
    w.instance = cw.instance();
    if (cw.has_push_price()) {
      checkPrice(cw.push_price(), "worker " + cw.name());
      w.push_bytes.known = true;
      w.push_bytes.fixed = cw.push_price().fixed_bytes();
      w.push_bytes.per_coordinate = cw.push_price().bytes_per_coordinate();
    }
  }
  if (c.has_push_price()) {
    checkPrice(c.push_price(), "all workers");
    core->push_bytes_.known = true;
    core->push_bytes_.fixed = c.push_price().fixed_bytes();
    core->push_bytes_.per_coordinate = c.push_price().bytes_per_coordinate();
  }
  core->next_id_ = c.next_worker_id();
  if (c.allocation_method() != settings.allocation.method) {
    spdlog::warn("checkpoint was written with allocation method {}, now {}: caps are re-planned",
                 c.allocation_method(), settings.allocation.method);
  }
  if (c.training_seed() != settings.training.seed) {
    spdlog::warn("checkpoint was written with training seed {}, now {}", c.training_seed(),
                 settings.training.seed);
  }
  core->rounds_since_alloc_ = c.rounds_since_alloc();
  core->upload_bytes_ = c.upload_bytes();
  core->download_bytes_ = c.download_bytes();
  core->full_bytes_ = c.full_bytes();
  core->late_pushes_ = c.late_pushes();
  core->reasked_ = c.pushes_asked_again();
  core->bad_reports_ = c.push_reports_unusable();
  core->steps_refused_ = c.steps_refused();
  for (const auto& r : c.rejections()) core->rejections_[r.reason()] = r.count();
  core->last_accuracy_ = c.last_accuracy();
  // Older checkpoints do not say: an accuracy above 0 after a round was measured.
  core->accuracy_known_ =
      c.has_accuracy_known() ? c.accuracy_known() : c.round() > 0 && c.last_accuracy() > 0.0;
  // time_s is training time: it goes on from the checkpoint's when training resumes (neither the
  // downtime nor the wait for the workers to re-join counts).
  core->resumed_elapsed_ = std::max(0.0, c.elapsed_seconds());
  core->start_time_ = core->clock_() - core->resumed_elapsed_;
  core->started_ = c.round() > 0;
  core->resuming_ = true;

  // The summary row the daemon prints if nothing more happens (e.g. training had finished).
  RoundRecord& rec = core->last_record_;
  rec.round = c.round() > 0 ? c.round() - 1 : 0;
  rec.time_s = c.elapsed_seconds();
  rec.train_loss = c.last_train_loss();
  rec.test_accuracy = c.last_accuracy();
  rec.accuracy_measured = core->accuracy_known_;
  rec.upload_bytes = c.upload_bytes();
  rec.download_bytes = c.download_bytes();
  rec.full_bytes = c.full_bytes();
  rec.late_pushes = c.late_pushes();
  rec.rejected = core->rejectedTotal();
  for (const auto& [id, w] : core->workers_) rec.workers.push_back(w.rec);
  // A checkpoint at or past max_rounds has nothing left to train, whether or not its run
  // finished (one stopped mid-run and restarted with a smaller max_rounds): it stays as it is,
  // never trained past the limit. A run that reached its target accuracy stays finished; given a
  // target above the accuracy it reached, it trains on.
  const bool reached_target =
      settings.target_accuracy > 0 && c.last_accuracy() >= settings.target_accuracy;
  if (c.round() >= settings.max_rounds || (c.finished() && reached_target)) {
    core->phase_ = Phase::kDone;
  }
  return core;
}

}  // namespace tern::server
