#include "server/coordinator_core.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/allocation/allocator.hpp"
#include "common/util/printable.hpp"
#include "common/util/rng.hpp"
#include "model_spec.hpp"
#include "server/federated_evaluation.hpp"
#include "server/link_checks.hpp"

namespace tern::server {
namespace {

std::vector<float> initialParameters(const ml::Model& model, uint64_t seed) {
  std::vector<float> params(model.numParams(), 0.0f);
  Rng rng(deriveSeed(seed, 0x6d6f64656cULL));
  model.init(params, rng);
  return params;
}

template <class Pred>
bool anyWorker(const std::map<uint32_t, Worker>& workers, Pred pred) {
  return std::any_of(workers.begin(), workers.end(), [&](const auto& e) { return pred(e.second); });
}

}  // namespace

void Effects::append(Effects&& more) {
  for (auto& m : more.messages) messages.push_back(std::move(m));
  for (auto& r : more.closed_rounds) closed_rounds.push_back(std::move(r));
  checkpoint_due = checkpoint_due || more.checkpoint_due;
  if (more.evaluate) evaluate = std::move(more.evaluate);
}

uint64_t Counters::rejectedTotal() const {
  uint64_t n = 0;
  for (const auto& [reason, count] : rejections) n += count;
  return n;
}

void stampAckHold(Message& m, double received_at, double now) {
  if (!m.envelope.has_ack()) return;
  m.envelope.mutable_ack()->set_hold_seconds(std::max(0.0, now - received_at));
}

CoordinatorCore::CoordinatorCore(const CoordinatorOptions& options,
                                 std::unique_ptr<ml::Model> model, bool evaluates, uint64_t session,
                                 double now)
    : options_(options),
      model_(std::move(model)),
      evaluates_(evaluates),
      session_(session),
      membership_(JoinRate{options.joins.per_connection.rate, options.joins.per_connection.burst}),
      planner_(options.allocation, uint32_t(model_->numParams())),
      aggregator_(options.optimizer, initialParameters(*model_, options.training.seed),
                  options.max_message_bytes, options.aggregation),
      bench_(options.stragglers),
      now_(now) {}

Effects CoordinatorCore::take() { return std::exchange(out_, Effects{}); }

void CoordinatorCore::reject(const std::string& peer, wire::Error::Code code,
                             const std::string& reason, const std::string& text,
                             std::optional<proto::ErrorAbout> about) {
  ++counters_.rejections[reason];
  spdlog::debug("rejected message from a peer: {} ({})", reason, text);
  out_.messages.push_back({peer, proto::error({code, text, about})});
}

void CoordinatorCore::send(Worker& w, Message m) {
  w.last_sent = now_;
  wakeMoved(w.rec.id);
  const size_t bytes = m.envelope.ByteSizeLong() + m.payload.size();
  w.rec.download_bytes += bytes;
  counters_.download_bytes += bytes;
  out_.messages.push_back({w.peer, std::move(m)});
}

void CoordinatorCore::sendRoundStart(Worker& w) {
  w.round_sent_at = now_;
  send(w, roundStartFor(w));
}

Effects CoordinatorCore::handleMalformed(const std::string& peer, const std::string& reason,
                                         double now) {
  now_ = now;
  reject(peer, wire::Error::MALFORMED, reason, "malformed message: " + reason);
  return take();
}

Effects CoordinatorCore::refuseJoin(const std::string& peer, const JoinRefusal& refusal,
                                    double now) {
  now_ = now;
  reject(peer, refusal.code, refusal.reason, refusal.text);
  return take();
}

Effects CoordinatorCore::handleMessage(const std::string& peer, const Message& msg,
                                       size_t wire_bytes, double received_at, double now) {
  now_ = now;
  const auto& env = msg.envelope;
  Worker* w = nullptr;
  if (env.version() != wire::PROTOCOL_VERSION) {
    reject(peer, wire::Error::BAD_VERSION, "bad_version",
           "protocol version " + std::to_string(env.version()) + " not supported");
  } else if (finished()) {
    handleFinished(peer, env);
  } else if (env.has_join() && !msg.payload.empty()) {
    reject(peer, wire::Error::MALFORMED, "unexpected_payload", "join has no payload");
  } else if (env.has_join()) {
    handleJoin(peer, env.join());
  } else if (env.has_push()) {
    handlePush(peer, msg, wire_bytes, received_at);
  } else if (!env.has_heartbeat() && !env.has_leave()) {
    reject(peer, wire::Error::MALFORMED, "unexpected_type",
           "message type not accepted by the coordinator");
  } else if (w = membership_.byPeer(peer);
             !w || (env.has_heartbeat() ? env.heartbeat().session() : env.leave().session()) !=
                       session_) {
    reject(peer, wire::Error::UNKNOWN_SESSION, "unknown_session", "unknown session");
  } else if (env.has_heartbeat()) {
    w->last_seen = now_;
    wakeMoved(w->rec.id);
  } else {
    handleLeave(*w, env.leave());
  }
  return take();
}

void CoordinatorCore::handleFinished(const std::string& peer, const wire::Envelope& env) {
  // Told to finish: a live worker, or one marked gone (told too, not waited for).
  if (const Worker* w = membership_.byPeerAmong(peer, told_to_finish_)) {
    // Its Leave says the Finish reached it; what it sent before is answered, not counted.
    if (env.has_leave() && env.leave().session() == session_ && finish_unacked_.erase(w->rec.id)) {
      return;
    }
    out_.messages.push_back(
        {peer, proto::error({wire::Error::SHUTTING_DOWN, "training has finished", {}})});
    return;
  }
  reject(peer, wire::Error::SHUTTING_DOWN, "finished", "training has finished");
}

void CoordinatorCore::handleLeave(Worker& w, const wire::Leave& leave) {
  tallyStale();
  // A worker that cannot train (its data does not fit the model) is a fault the operator fixes.
  const bool fault = leave.reason().rfind("cannot train", 0) == 0;
  spdlog::log(fault ? spdlog::level::warn : spdlog::level::info, "worker {} ({}) left: {}",
              w.rec.id, w.rec.name, printable(leave.reason()));
  w.rec.alive = false;
  // The Leave is in, and all the worker sent before it: it may close its connection.
  send(w, proto::ack({.leave = true}));
  // An acknowledged push stays in its round: it was computed on this round's model.
  planner_.plan(membership_);
  if (phase_.is(Phase::kRunning) && allAnswered()) {
    closeRound();
  } else {
    admitSittingOut();
  }
}

void CoordinatorCore::takeLink(Worker& w, const wire::LinkModel& link, bool from_push) {
  // A model no link could have is dropped and counted (the last good one stays); a push's
  // sender is told, after its ack.
  if (const char* why = invalidLinkModel(link, options_.max_message_bytes)) {
    if (from_push) {
      reject(w.peer, wire::Error::MALFORMED, "bad_link_model",
             std::string("link model dropped: ") + why);
    } else {
      ++counters_.rejections["bad_link_model"];
      spdlog::warn("worker {}: link model in its join dropped: {}", w.rec.name, why);
    }
    return;
  }
  if (from_push) planner_.noteLink(w, link);
  w.rec.link = link;
}

void CoordinatorCore::handleJoin(const std::string& peer, const wire::Join& join) {
  tallyStale();  // a full table may forget a member, and the joiner may take a seat
  const SeatLimits limits{aggregator_.largestFrameBytes(), options_.max_workers,
                          forgetAfterSeconds(), options_.joins.pending_seconds};
  if (auto refusal = layoutRefusal(join, model_->spec())) {
    reject(peer, refusal->code, refusal->reason, refusal->text);
    return;
  }
  if (auto refusal = membership_.screenJoin(peer, join, limits, now_)) {
    reject(peer, refusal->code, refusal->reason, refusal->text);
    return;
  }
  Worker& w = membership_.admit(peer, join, now_);
  w.evaluates = join.eval_rows() > 0;
  w.eval_rows = join.eval_rows();
  if (join.has_link()) takeLink(w, join.link(), false);
  w.rec.alive = true;
  w.rec.pushed = false;
  clearReport(w.rec);
  w.refused = false;
  w.dropPush();
  w.last_seen = now_;
  planner_.plan(membership_);
  send(w, welcomeFor(w, join));
  w.synced_round = round_;  // the welcome carries model_{round}
  if (phase_.is(Phase::kResuming) && !phase_.resume_deadline) {
    phase_.resume_deadline =
        now_ + std::max(options_.worker_patience_seconds, options_.round_deadline_seconds);
  }
  const size_t alive = membership_.alive();
  const bool waiting = phase_.is(Phase::kWaiting) || phase_.is(Phase::kResuming);
  if ((waiting && alive >= options_.min_workers) || (phase_.is(Phase::kIdle) && alive > 0)) {
    maybeStart();
  } else if (phase_.is(Phase::kRunning) && planner_.admit(membership_, w, round_)) {
    sendRoundStart(w);  // joins the round in progress: its model is current
  }
}

void CoordinatorCore::maybeStart() {
  if (!start_time_) start_time_ = now_ - resumed_elapsed_;
  phase_.fire(PhaseEvent::kStart);
  startRound();
}

Message CoordinatorCore::welcomeFor(const Worker& w, const wire::Join& join) {
  wire::Welcome wel;
  wel.set_worker_id(w.rec.id);
  wel.set_session(session_);
  wel.set_join_nonce(join.join_nonce());
  *wel.mutable_model() = toWire(model_->spec());
  auto* tr = wel.mutable_training();
  tr->set_batch_size(options_.training.batch_size);
  tr->set_local_steps(options_.training.local_steps);
  tr->set_local_lr(options_.training.local_lr);
  tr->set_seed(options_.training.seed);
  wel.set_cap(w.rec.cap);
  wel.set_threshold(w.rec.threshold);
  wel.set_round(round_);
  wel.set_data_share(w.rec.share);
  wel.set_max_message_bytes(options_.max_message_bytes);
  wel.set_heartbeat_seconds(options_.heartbeat_seconds);
  wel.set_worker_patience_seconds(options_.worker_patience_seconds);
  wel.set_round_deadline_seconds(options_.round_deadline_seconds);
  wel.set_acks_leave(true);
  wel.set_plans_by_link_time(
      allocation::plansByLinkTime(options_.allocation.method, options_.allocation.budget));
  // A replica that is the model, or one update behind it, is not sent the whole model again.
  const uint64_t replica = join.replica_checksum();
  const auto& params = aggregator_.parameters();
  const auto& update = aggregator_.lastUpdate();
  if (replica != 0 && join.replica_round() == round_ && replica == aggregator_.modelChecksum()) {
    wel.set_model_payload(wire::Welcome::REPLICA_CURRENT);
    spdlog::info("worker {} holds the model of round {}: welcomed without it", w.rec.name, round_);
    return proto::welcome(std::move(wel), {});
  }
  if (replica != 0 && join.replica_round() + 1 == round_ && !update.empty() &&
      replica == aggregator_.previousChecksum() && update.size() < params.size() * sizeof(float)) {
    wel.set_model_payload(wire::Welcome::REPLICA_UPDATE);
    spdlog::info(
        "worker {} holds the model of round {}: welcomed with the update to round {} "
        "({} bytes, the model {})",
        w.rec.name, round_ - 1, round_, update.size(), params.size() * sizeof(float));
    return proto::welcome(std::move(wel), update);
  }
  return proto::welcome(std::move(wel), floatsToBytes(params));
}

void CoordinatorCore::admitSittingOut() {
  // Caps freed by members that went without pushing go to the workers sitting the round out.
  if (!phase_.is(Phase::kRunning)) return;
  for (auto& [id, w] : membership_.all()) {
    if (!w.rec.alive || w.plan.in_round || w.rec.pushed || w.rec.benched) continue;
    if (planner_.admit(membership_, w, round_)) sendRoundStart(w);
  }
  tallyStale();
}

Message CoordinatorCore::roundStartFor(const Worker& w) const {
  wire::RoundStart rs;
  rs.set_round(round_);
  rs.set_cap(w.plan.round_cap);
  rs.set_threshold(w.rec.threshold);
  rs.set_data_share(w.rec.share);
  rs.set_learning_rate(aggregator_.learningRate(round_));
  rs.set_session(session_);
  rs.set_evaluate(w.evaluates &&
                  federatedEvaluationDue(round_, options_.eval_every, options_.max_rounds));
  if (phase_.is(Phase::kRunning))
    rs.set_deadline_seconds_left(std::max(0.0, round_deadline_ - now_));
  if (w.synced_round == round_) return proto::roundStart(std::move(rs), {});  // current
  if (w.synced_round && *w.synced_round + 1 == round_ && !aggregator_.lastUpdate().empty())
    return proto::roundStart(std::move(rs), aggregator_.lastUpdate());
  rs.set_full_model(true);
  return proto::roundStart(std::move(rs), floatsToBytes(aggregator_.parameters()));
}

void CoordinatorCore::startRound() {
  round_deadline_ = now_ + options_.round_deadline_seconds;
  wakesStale();  // seats and pushes of everyone change
  // A round restarted after every worker went keeps its acknowledged pushes: the caps handed
  // out now get what the budget leaves after those.
  bool carried = false;
  for (auto& [id, w] : membership_.all()) {
    clearReport(w.rec);  // a gone worker's too: a row reports this round's pushes only
    carried = carried || (!w.rec.alive && w.pending);
    if (!w.rec.alive && !w.pending) w.rec.pushed = false;
    if (w.rec.alive) w.plan.in_round = false;
  }
  for (auto& [id, w] : membership_.all()) {
    if (!w.rec.alive) continue;
    w.rec.pushed = false;
    w.refused = false;
    w.dropPush();
    if (!bench_.offers(w.rec, round_)) continue;  // benched, and no probe due
    if (carried) {
      if (!planner_.admit(membership_, w, round_)) continue;
    } else {
      w.plan.in_round = true;
      w.plan.round_cap = w.rec.cap;
    }
    sendRoundStart(w);
    w.synced_round = round_;
  }
  tallyStale();
}

void CoordinatorCore::handlePush(const std::string& peer, const Message& msg, size_t wire_bytes,
                                 double received_at) {
  const auto& push = msg.envelope.push();
  Worker* w = membership_.byPeer(peer);
  if (!w || push.session() != session_) {
    // Named as a push's, so that the worker times it (the refusal leaves as it arrives).
    reject(peer, wire::Error::UNKNOWN_SESSION, "unknown_session", "unknown session",
           proto::ErrorAbout{push.round(), !push.probe(), session_});
    return;
  }
  if (push.worker_id() != w->rec.id) {
    reject(peer, wire::Error::MALFORMED, "wrong_worker_id", "worker id does not match");
    return;
  }
  w->last_seen = now_;
  wakeMoved(w->rec.id);  // seen now; its link, push and patience may change below
  if (push.has_link()) takeLink(*w, push.link(), true);
  Effects notice = take();  // out_ held nothing else: handlePush starts an event
  const auto ack = [&](bool probe) {
    Message m = proto::ack({.round = push.round(),
                            .bytes_received = wire_bytes,
                            .probe = probe,
                            .probe_id = push.probe_id()});
    stampAckHold(m, received_at, now_);
    send(*w, std::move(m));
  };
  if (push.probe()) {
    // Calibration traffic, acknowledged and discarded: upload traffic all the same.
    w->rec.upload_bytes += wire_bytes;
    counters_.upload_bytes += wire_bytes;
    ack(true);
  } else if (!phase_.is(Phase::kRunning) || push.round() != round_ || !w->plan.in_round) {
    // A round the worker could not compute, said after it closed (a trainer's timeout outlasts
    // the deadline): counted, nothing to refuse or to ask again, and no sign of a timely push.
    if (!push.failure().empty()) {
      ++counters_.rejections["worker_failed"];
    } else {
      refuseOffRound(*w, push.round(), received_at);
    }
  } else if (w->rec.pushed) {
    // Idempotent: a duplicate of an accepted push is acknowledged again, not applied twice.
    ++counters_.rejections["duplicate"];
    ack(false);
  } else if (!push.failure().empty()) {
    spdlog::warn("worker {} ({}) could not compute round {}: {}", w->rec.id, w->rec.name, round_,
                 printable(push.failure()));
    refusePush(*w, wire::Error::BAD_PAYLOAD, "worker_failed",
               "no gradient: " + printable(push.failure()));
  } else if (!std::isfinite(push.local_loss())) {
    refusePush(*w, wire::Error::BAD_PAYLOAD, "non_finite_loss", "local loss is not finite");
  } else if (auto decoded = aggregator_.decode(msg.payload); !decoded.value) {
    refusePush(*w, wire::Error::BAD_PAYLOAD, "bad_payload", "gradient rejected: " + decoded.error);
  } else {
    ack(false);
    out_.append(std::move(notice));
    acceptPush(*w, msg, wire_bytes, received_at, std::move(decoded));
    return;
  }
  out_.append(std::move(notice));
}

void CoordinatorCore::refuseOffRound(Worker& w, uint64_t push_round, double received_at) {
  // A worker sitting out the round (it joined with the round's budget spent) has no cap in it.
  const bool sits_out = phase_.is(Phase::kRunning) && push_round == round_;
  if (!sits_out) ++counters_.late_pushes;
  const std::string r = std::to_string(push_round);
  reject(w.peer, wire::Error::BAD_ROUND, sits_out ? "not_in_round" : "late_or_future_round",
         sits_out ? "push for round " + r +
                        ", which this worker takes no part in: it starts with the next"
                  : "push for round " + r + ", current round is " + std::to_string(round_),
         proto::ErrorAbout{push_round, true, {}});
  // A benched member's late probe is timed from its round start: in the deadline, it is back.
  if (!sits_out && w.round_sent_at &&
      bench_.latePush(w.rec, push_round, received_at - *w.round_sent_at,
                      options_.round_deadline_seconds)) {
    tallyStale();
    planner_.plan(membership_);
    admitSittingOut();
  }
}

void CoordinatorCore::acceptPush(Worker& w, const Message& msg, size_t wire_bytes,
                                 double received_at, compression::DecodeResult decoded) {
  const auto& push = msg.envelope.push();
  w.pending = std::move(*decoded.value);
  w.pending_norm = aggregator_.clipNorm(*w.pending);
  // What a push costs besides its coordinates: the envelope, the frames and the codec's header.
  const size_t coordinate_bytes = msg.payload.size() - decoded.header_bytes;
  w.round_push = PushSample{double(wire_bytes) - double(std::min(wire_bytes, coordinate_bytes)),
                            double(coordinate_bytes), double(w.pending->nonZeros())};
  w.loss = push.local_loss();
  if (tally_) tally_->notePush(w);
  w.rec.pushed = true;
  // An evaluation over more rows than the worker's join declared is not its own: refused, or one
  // member could outweigh the fleet's held-out rows (and end the run at target_accuracy).
  if (!takeEvaluation(w.rec, push, round_, std::min(kMaxSamplesPerWorker, w.eval_rows))) {
    ++counters_.evaluations_unusable;
    spdlog::debug("worker {} ({}): unusable evaluation with its push: dropped", w.rec.id,
                  w.rec.name);
  }
  if (w.round_sent_at) w.observed_push_seconds = std::max(0.0, received_at - *w.round_sent_at);
  if (!takeReport(w.rec, push, aggregator_.dim())) {
    ++counters_.push_reports_unusable;
    spdlog::debug(
        "worker {} ({}): unusable tuner report with its push (level {}, cost {}, "
        "improvement {}, step {}): recorded as zeros",
        w.rec.id, w.rec.name, push.level(), push.predicted_cost(), push.predicted_improvement(),
        push.predicted_step());
  }
  w.rec.upload_bytes += wire_bytes;
  counters_.upload_bytes += wire_bytes;
  counters_.full_bytes += aggregator_.dim() * sizeof(float);
  if (allAnswered()) closeRound();
}

void CoordinatorCore::refusePush(Worker& w, wire::Error::Code code, const std::string& reason,
                                 const std::string& text) {
  // The worker does not resend on its own: it is asked again at the deadline if still needed.
  if (tally_) tally_->noteRefusal(w);
  w.refused = true;
  reject(w.peer, code, reason, text, proto::ErrorAbout{round_, true, {}});
  if (allAnswered()) closeRound();
}

void CoordinatorCore::recordTotals(RoundRecord& rec) const {
  rec.upload_bytes = counters_.upload_bytes;
  rec.download_bytes = counters_.download_bytes;
  rec.full_bytes = counters_.full_bytes;
  rec.late_pushes = counters_.late_pushes;
  rec.rejected = counters_.rejectedTotal();
  rec.workers = membership_.records();
}

void CoordinatorCore::closeRound() {
  const StepResult step = aggregator_.step(membership_, round_);
  if (step.refused) ++counters_.steps_refused;
  counters_.pushes_clipped += step.clipped;
  const bool bench_moved = bench_.closeRound(membership_, round_, counters_.benched);
  tallyStale();
  wakesStale();  // the step let go of every push; prices may move
  RoundRecord rec;
  rec.round = round_;
  rec.time_s = now_ - start_time_.value_or(now_);
  rec.train_loss = step.train_loss;
  rec.participants = step.participants;
  if (const auto fed = federatedEvaluation(membership_, round_)) {
    last_federated_ = fed;
    rec.federated_accuracy = fed->accuracy;
    rec.federated_rows = fed->rows;
    // Without a test set, the workers' evaluations are the run's accuracy.
    if (!evaluates_) {
      last_accuracy_ = fed->accuracy;
      rec.evaluated = true;
    }
  }
  ++round_;
  const bool last = round_ >= options_.max_rounds;
  recordTotals(rec);
  const bool prices_moved = planner_.closeRound(membership_);
  if (prices_moved || bench_moved) planner_.plan(membership_);
  if (evaluates_ && (round_ % options_.eval_every == 0 || last)) {
    // The record waits for its accuracy, and the next round for the record.
    phase_.fire(PhaseEvent::kAwaitEvaluation);
    evaluating_ = std::move(rec);
    evaluating_last_ = last;
    out_.evaluate = EvaluationRequest{
        round_, std::make_shared<const std::vector<float>>(aggregator_.parameters())};
    return;
  }
  completeRound(std::move(rec), last);
}

Effects CoordinatorCore::handleEvaluated(double accuracy, double now) {
  now_ = now;
  tallyStale();
  if (!phase_.is(Phase::kEvaluating) || !evaluating_) return take();  // stopped meanwhile
  RoundRecord rec = std::move(*evaluating_);
  evaluating_.reset();
  last_accuracy_ = accuracy;
  rec.evaluated = true;
  const bool reached = options_.target_accuracy > 0 && accuracy >= options_.target_accuracy;
  if (!evaluating_last_ && !reached) phase_.fire(PhaseEvent::kEvaluated);
  completeRound(std::move(rec), evaluating_last_);
  return take();
}

void CoordinatorCore::completeRound(RoundRecord rec, bool last) {
  rec.test_accuracy = lastAccuracy();
  rec.accuracy_measured = last_accuracy_.has_value();
  const bool reached =
      options_.target_accuracy > 0 && rec.evaluated && lastAccuracy() >= options_.target_accuracy;
  const uint64_t every = options_.checkpoint_every;
  if (last || reached || (every > 0 && round_ % every == 0)) out_.checkpoint_due = true;
  last_record_ = rec;
  out_.closed_rounds.push_back(std::move(rec));
  if (reached) {
    spdlog::info("round {}: test accuracy {:.4f} reached target_accuracy {}: training is over",
                 last_record_.round, lastAccuracy(), options_.target_accuracy);
  }
  if (last || reached) {
    finishAll();
  } else {
    startRound();
  }
}

void CoordinatorCore::finishAll() {
  phase_.fire(PhaseEvent::kFinish);
  for (auto& [id, w] : membership_.all()) {
    // A worker marked gone but not forgotten is told too (not waited for, no last step).
    // One step behind: the last step; further (benched, kept up by its probes only): the
    // whole model, so that every replica ends as the coordinator's model.
    Payload last_step;
    bool full = false;
    if (w.rec.alive && w.synced_round && *w.synced_round + 1 == round_ &&
        !aggregator_.lastUpdate().empty()) {
      last_step = aggregator_.lastUpdate();
    } else if (w.rec.alive && w.synced_round && *w.synced_round < round_) {
      last_step = floatsToBytes(aggregator_.parameters());
      full = true;
    }
    send(w, proto::finish({round_, last_accuracy_, full}, std::move(last_step)));
    told_to_finish_.insert(id);
    if (w.rec.alive && w.acks_finish) finish_unacked_.insert(id);
  }
}

Effects CoordinatorCore::handleStop(double now) {
  now_ = now;
  tallyStale();
  if (!finished()) finishAll();
  return take();
}

PatienceContext CoordinatorCore::patience() const {
  return {options_.worker_patience_seconds, options_.round_deadline_seconds,
          phase_.is(Phase::kRunning), planner_.meanPrice(), aggregator_.dim()};
}

void CoordinatorCore::markSilentGone() {
  bool membership_changed = false;
  const PatienceContext context = patience();
  for (auto& [id, w] : membership_.all()) {
    if (!w.rec.alive) continue;
    if (now_ >= w.last_seen + patienceFor(w, context)) {
      spdlog::warn("worker {} ({}) silent for {:.1f} s: marked gone", id, w.rec.name,
                   now_ - w.last_seen);
      w.rec.alive = false;  // an acknowledged push stays in its round
      wakeMoved(id);
      membership_changed = true;
      continue;
    }
    if (now_ >= w.last_sent + options_.heartbeat_seconds)
      send(w, proto::heartbeatMessage({session_, id}, round_));
  }
  if (membership_changed) {
    tallyStale();
    planner_.plan(membership_);
    admitSittingOut();
  }
}

void CoordinatorCore::roundTimers() {
  const bool any_pushed =
      anyWorker(membership_.all(), [](const Worker& w) { return bool(w.pending); });
  if (allAnswered() ||
      (now_ >= round_deadline_ && any_pushed && pushedShare() >= options_.quorum_share)) {
    closeRound();
    return;
  }
  if (now_ < round_deadline_) return;
  // Nobody (or too little data) pushed in time: the round stays open another period, and each
  // worker whose push was refused is asked again (a worker never resends on its own).
  round_deadline_ = now_ + options_.round_deadline_seconds;
  recallBenched();
  for (auto& [id, w] : membership_.all()) {
    if (!w.rec.alive || !w.refused || w.rec.pushed) continue;
    w.refused = false;
    ++counters_.pushes_asked_again;
    spdlog::warn("round {}: asking worker {} ({}) again after its push was refused", round_, id,
                 w.rec.name);
    sendRoundStart(w);
  }
  tallyStale();
  if (membership_.alive() == 0) phase_.fire(PhaseEvent::kEveryoneGone);
}

Effects CoordinatorCore::handleTimeout(double now) {
  now_ = now;
  housekeeping_at_ = now + options_.heartbeat_seconds;
  tallyStale();
  if (finished()) return take();
  // A worker gone for long is forgotten, so that the table and the checkpoint do not grow.
  membership_.forget(now_, forgetAfterSeconds(),
                     std::min(forgetAfterSeconds(), options_.joins.pending_seconds));
  markSilentGone();
  if (phase_.is(Phase::kResuming) && membership_.alive() > 0 && phase_.resume_deadline &&
      now_ >= *phase_.resume_deadline) {
    spdlog::info("resuming round {} with {} of the known workers back", round_,
                 membership_.alive());
    maybeStart();
  } else if (phase_.is(Phase::kRunning)) {
    roundTimers();
  }
  return take();
}

}  // namespace tern::server
