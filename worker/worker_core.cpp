#include "worker/worker_core.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/util/printable.hpp"
#include "proto/model_spec.hpp"
#include "proto/worker_messages.hpp"
#include "worker/welcome_terms.hpp"

namespace tern::worker {

namespace {

// A time the coordinator said, if it is one (finite and positive).
std::optional<double> saidTime(double v) {
  return std::isfinite(v) && v > 0.0 ? std::optional(v) : std::nullopt;
}

}  // namespace

WorkerCore::WorkerCore(const WorkerOptions& options, std::shared_ptr<const ml::Dataset> shard,
                       uint64_t instance)
    : WorkerCore(options, localDataOf(std::move(shard)), instance) {}

WorkerCore::WorkerCore(const WorkerOptions& options, LocalData data, uint64_t instance)
    : options_(options),
      data_(std::move(data)),
      instance_(instance),
      session_(options.heartbeat_seconds, options.coordinator_patience_seconds),
      replica_(options.max_message_bytes),
      link_(options.link, options.coordinator_patience_seconds) {
  if (!options_.probe_filler) options_.probe_filler = std::make_shared<proto::ProbeFiller>();
}

WorkerCore::~WorkerCore() = default;

Effects WorkerCore::effects(std::vector<Message> send) {
  return Effects{std::move(send), std::nullopt, nextWakeup()};
}

Message WorkerCore::sendable(Message m, double now) {
  session_.sent(now);
  return m;
}

Effects WorkerCore::start(double now) { return effects(join(now)); }

std::vector<Message> WorkerCore::stop(const std::string& reason, double now) {
  stopping_ = true;
  if (pending_) {
    // The daemon is stopping: nothing goes out for this round, and its Leave follows.
    spdlog::info("round {}: the gradient was left unfinished: stopping", pending_->round);
    pending_.reset();
  }
  if (!joined() || finished_ || left_) return {};
  left_ = true;
  session_.leaveSent(session_.acksLeave());
  return {sendable(proto::leaveMessage(session_.address(), reason), now)};
}

std::vector<Message> WorkerCore::afterStop(const Message& msg, size_t wire_bytes, double now) {
  const auto& env = msg.envelope;
  if (env.version() != wire::PROTOCOL_VERSION) return {};
  session_.noteLeaveAnswer(env);
  if ((env.has_ack() && !env.ack().leave()) || env.has_finish()) {
    // A push's ack still times the link (the fit is printed at exit); the Finish's last update
    // goes into the replica, and the Leave that went out answers the Finish too.
    onMessage(msg, wire_bytes, now);
    return {};
  }
  stats_.received_bytes += wire_bytes;
  if (env.has_error()) {
    // Logged, not acted on: a refused push is not taken back, nothing more goes out.
    spdlog::warn("coordinator error {}: {}", int(env.error().code()),
                 printable(env.error().text()));
  } else if (env.has_round_start()) {
    // The round's update goes into the replica (the coordinator counts this worker as having
    // it, and a Finish after it carries no step), but no gradient is computed for it.
    std::string error;
    if (joined() && env.round_start().session() == session() &&
        replica_.takeRoundModel(env.round_start(), msg.payload, error) == Replica::Sync::refused)
      refuse(error);
  }
  // Nothing new starts after a stop: no gradient, no re-join.
  return {};
}

std::vector<Message> WorkerCore::join(double now) {
  pending_.reset();
  proto::JoinFields f;
  f.worker_name = options_.name;
  f.join_nonce = session_.joining(now);
  f.instance = instance_;
  f.max_message_bytes = options_.max_message_bytes;
  if (partition_fingerprint_) {
    f.partition_fingerprint = partition_fingerprint_;
    f.shard_index = uint32_t(options_.shard_index);
    f.shard_total = uint32_t(options_.shard_total);
  }
  // What this process has measured of its link (the fit survives a re-join).
  if (link_.samples() > 0) f.link = link_.toWire();
  // The replica it holds, which may spare the coordinator sending the whole model again.
  f.replica = replica_.announce();
  f.sample_count = data_.rows;
  f.label_histogram = data_.label_histogram;
  f.compressors = compression::compressorNames();
  f.error_feedback = options_.push.strategy.error_feedback;
  Message m = proto::joinMessage(f);
  for (const auto& t : data_.tensors) *m.envelope.mutable_join()->add_tensors() = toWire(t);
  m.envelope.mutable_join()->set_eval_rows(data_.eval_rows);
  return {sendable(std::move(m), now)};
}

namespace {
// Counts one more of a repeated event; true the 1st, 2nd, 4th, 8th ... time, when it is said (a
// stream of bad messages or results cannot fill the log).
bool countAndSayNow(uint64_t& count) { return std::has_single_bit(++count); }
}  // namespace

std::vector<Message> WorkerCore::refuse(const std::string& why) {
  const auto level = countAndSayNow(stats_.rejected) ? spdlog::level::warn : spdlog::level::debug;
  spdlog::log(level, "refused a coordinator message: {} ({} refused so far)", why, stats_.rejected);
  return {};
}

Effects WorkerCore::onMessage(const Message& msg, size_t wire_bytes, double now) {
  stats_.received_bytes += wire_bytes;
  const auto& env = msg.envelope;
  if (env.version() != wire::PROTOCOL_VERSION) {
    // The coordinator's refusal of this worker's version comes in its own version: read it, and
    // stop, since no re-join can help.
    if (env.has_error() && env.error().code() == wire::Error::BAD_VERSION) {
      fatal_ = "the coordinator speaks protocol version " + std::to_string(env.version()) +
               ", this worker " + std::to_string(wire::PROTOCOL_VERSION) +
               ": run the same tern release on both";
      finished_ = true;
      return effects();
    }
    return effects(refuse("protocol version mismatch"));
  }
  session_.heard(now);
  session_.noteLeaveAnswer(env);
  switch (env.body_case()) {
    case wire::Envelope::kWelcome:
      return handleWelcome(msg, now);
    case wire::Envelope::kRoundStart:
      if (!joined() || env.round_start().session() != session())
        return effects(refuse("round before welcome"));
      return handleRoundStart(msg, now);
    case wire::Envelope::kAck:
      return handleAck(env.ack(), now);
    case wire::Envelope::kHeartbeat:
      if (joined() && env.heartbeat().session() != session()) {
        spdlog::warn("coordinator reports a new session: re-joining");
        ++stats_.rejoins;
        return effects(join(now));
      }
      return effects();
    case wire::Envelope::kFinish:
      return handleFinish(msg, now);
    case wire::Envelope::kError:
      return handleError(env.error(), now);
    default:
      return effects(refuse("unexpected message type"));
  }
}

Effects WorkerCore::handleAck(const wire::Ack& a, double now) {
  if (a.leave()) return effects();  // a Leave's answer (Session::noteLeaveAnswer)
  const uint64_t key =
      a.probe() ? LinkMonitor::probeKey(a.probe_id()) : LinkMonitor::pushKey(a.round());
  if (!std::isfinite(a.hold_seconds()) || a.hold_seconds() < 0.0)
    refuse("ack with hold time " + std::to_string(a.hold_seconds()));  // not timed
  link_.acked(key, a.hold_seconds(), now);
  if (!a.probe()) link_report_.taken(a.round());
  // Exploration is decided on the push's ack, with that push's time in the fit; the probe goes
  // out ahead of the next push.
  if (joined() && !a.probe()) link_.queueExploration(now);
  return effects();
}

Effects WorkerCore::handleFinish(const Message& msg, double now) {
  const auto& f = msg.envelope.finish();
  std::string error;
  if (joined() && !replica_.takeFinal(f.round(), msg.payload, f.full_model(), error))
    refuse("bad final update: " + error);
  if (f.has_test_accuracy()) {
    spdlog::info("coordinator finished training at round {} (test accuracy {:.4f})", f.round(),
                 f.test_accuracy());
  } else {
    spdlog::info("coordinator finished training at round {} (nothing evaluated)", f.round());
  }
  finished_ = true;
  pending_.reset();
  // The coordinator waits for this before it exits: a Finish still on its way (the last update
  // on a slow downlink) is not cut off by the coordinator's exit.
  if (!joined() || left_) return effects();
  left_ = true;
  return effects({sendable(proto::leaveMessage(session_.address(), "finished"), now)});
}

Effects WorkerCore::joinRefused(const std::string& what, const wire::Error& e, double wait,
                                double now) {
  spdlog::error("{}: {}", what, printable(e.text()));
  session_.refusedUntil(now + wait, what + ": " + printable(e.text()));
  return effects();
}

Effects WorkerCore::handleError(const wire::Error& e, double now) {
  spdlog::warn("coordinator error {}: {}", int(e.code()), printable(e.text()));
  // A push refused as late or from a worker marked gone is refused as it arrives: the refusal
  // times it as an ack would (a slow push refused every time is how its link gets measured at
  // all). A bad payload's refusal may wait for the round's close: not timed; nor a push refused
  // by a coordinator of another session than the one it was sent to.
  const bool same_coordinator = e.session() == 0 || e.session() == session();
  if (e.about_push() && (e.code() == wire::Error::BAD_ROUND ||
                         (e.code() == wire::Error::UNKNOWN_SESSION && same_coordinator)))
    link_.acked(LinkMonitor::pushKey(e.round()), 0.0, now);
  const double retry = std::max(10.0, options_.heartbeat_seconds);
  switch (e.code()) {
    case wire::Error::UNKNOWN_SESSION:
      // A restarted coordinator refuses, one by one, every message that queued up while it was
      // away; one join answers them all. A join that gets no welcome is retried on silence.
      if (!joined() && session_.joinSent() && now - *session_.joinSent() < session_.patience())
        return effects();
      ++stats_.rejoins;
      return effects(join(now));
    case wire::Error::MESSAGE_LIMIT:
      // The model will not fit however often this worker asks: a configuration to change.
      fatal_ = "the coordinator refused this worker: " + printable(e.text());
      finished_ = true;
      return effects();
    case wire::Error::TOO_MANY_WORKERS:
      // A full table frees up as gone workers are forgotten: ask again now and then.
      if (!joined())
        return joinRefused("the coordinator admits no more workers now", e, retry, now);
      break;
    case wire::Error::PARTITION_MISMATCH:
      // The live workers cut their shards from another partition: it is admitted once no worker
      // of the other partition is live: ask again now and then, saying why each time.
      if (!joined())
        return joinRefused("the coordinator refused this worker's shard", e, retry, now);
      break;
    case wire::Error::LAYOUT_MISMATCH:
      // The trainer trains another model than the coordinator's: a configuration to change on one
      // side; asked again now and then (a coordinator restarted with the right model takes it).
      if (!joined())
        return joinRefused("the coordinator's model has another layout than this worker's trainer",
                           e, retry, now);
      break;
    case wire::Error::NAME_TAKEN:
      // Another process holds the name; it is free again once the coordinator marks it gone.
      if (!joined())
        return joinRefused("the coordinator refused the name '" + options_.name + "'", e,
                           std::max(1.0, options_.heartbeat_seconds), now);
      break;
    case wire::Error::SHUTTING_DOWN:
      finished_ = true;
      break;
    default:
      break;
  }
  // A push refused (late, or with a bad payload): what it carried is owed again.
  if (e.about_push() && push_) push_->takeBack(e.round(), stats_);
  return effects();
}

Effects WorkerCore::refuseWelcome(const wire::Welcome& w, const WelcomeRefusal& r, double now) {
  using Then = WelcomeRefusal::Then;
  refuse(r.why);
  if (r.then == Then::give_up) {
    fatal_ = r.why;
    finished_ = true;
  } else if (r.then == Then::ask_later) {
    // A model that does not fit this shard (features, labels): the coordinator's configuration
    // or this worker's data is wrong, and either may be mended without touching the other (a
    // fleet must not stay down for a typo at the coordinator).
    const double wait = session_.unfit(r.why, now);
    spdlog::error("cannot train the coordinator's model: {}; asking again in {:g} s", r.why, wait);
  }
  // The coordinator is told, so it does not wait for pushes that will never come.
  auto leave = proto::leaveMessage({w.session(), w.worker_id()}, "cannot train: " + r.why);
  session_.leaveSent(w.acks_leave());
  return effects({sendable(std::move(leave), now)});
}

Effects WorkerCore::handleWelcome(const Message& msg, double now) {
  const auto& w = msg.envelope.welcome();
  // A welcome answering an earlier join (several went out while the link was down) is ignored:
  // taking each would reset the worker once per welcome and push the same round once per reset.
  if (w.join_nonce() != 0 && w.join_nonce() != session_.joinNonce()) {
    ++stats_.stale_welcomes;
    spdlog::debug("ignored a welcome answering an earlier join ({} of {})", w.join_nonce(),
                  session_.joinNonce());
    return effects();
  }
  auto model = welcomeModel(w, data_);
  if (auto* r = std::get_if<WelcomeRefusal>(&model)) return refuseWelcome(w, *r, now);
  auto& m = *std::get<std::shared_ptr<ml::Model>>(model);
  std::vector<float> params;
  if (w.model_payload() == wire::Welcome::FULL_MODEL) {
    auto full = welcomeParams(msg.payload, m.numParams());
    if (auto* r = std::get_if<WelcomeRefusal>(&full)) return refuseWelcome(w, *r, now);
    params = std::move(std::get<std::vector<float>>(full));
  } else {
    std::string error;
    auto held = replica_.fromWelcome(w, msg.payload, m.numParams(), error);
    if (!held) {
      // Asked again at once (unless stopping), naming no replica: the whole model comes. A join
      // that named none already is not answered so by a coordinator that keeps the protocol:
      // that one waits for the usual retry, not a join per welcome.
      const bool named = replica_.named();
      replica_.clear();
      auto out = refuseWelcome(w, {"welcome without the whole model, but " + error}, now);
      if (stopping_ || !named) return out;
      ++stats_.rejoins;
      for (auto& j : join(now)) out.send.push_back(std::move(j));
      out.wake_at = nextWakeup();
      return out;
    }
    params = std::move(*held);
  }
  auto push = welcomePushes(w, options_.push, m, data_.shard.get(), uint32_t(params.size()));
  if (auto* r = std::get_if<WelcomeRefusal>(&push)) return refuseWelcome(w, *r, now);
  takeWelcome(w, std::move(std::get<std::shared_ptr<ml::Model>>(model)), std::move(params),
              std::move(std::get<std::unique_ptr<PushBuilder>>(push)));
  return effects();
}

void WorkerCore::takeWelcome(const wire::Welcome& w, std::shared_ptr<ml::Model> model,
                             std::vector<float> params, std::unique_ptr<PushBuilder> push) {
  model_ = std::move(model);
  peer_max_bytes_ = w.max_message_bytes() > 0 ? std::optional(w.max_message_bytes()) : std::nullopt;
  replica_.reset(std::move(params), w.round());
  cap_ = w.cap();
  stats_.data_share = w.data_share();
  const auto& t = w.training();
  plan_ = {t.batch_size(), t.local_steps(), t.local_lr(), t.seed()};
  rng_.seed(deriveSeed(t.seed(), 0x776f726b6572ULL + w.worker_id()));
  // The residual starts empty on every (re-)join: it belonged to a model the coordinator may no
  // longer hold. The link survives a re-join, and so does its fit.
  if (push_) push->keepFitOf(*push_);
  push_ = std::move(push);
  link_.reset();
  link_report_.reset();
  link_.setPlansByLinkTime(w.plans_by_link_time());
  pushed_round_.reset();
  pending_.reset();
  session_.welcomed({w.session(), w.worker_id()}, w.acks_leave(), w.heartbeat_seconds(),
                    w.worker_patience_seconds());
  spdlog::info("joined as worker {} (session {:x}), cap {}, round {}", id(), session(), cap_,
               replica_.round());
  // The train goes out one probe ahead of each push (see onGradient).
  link_.queueCalibration();
}

void WorkerCore::takeRoundSettings(const wire::RoundStart& rs) {
  cap_ = rs.cap();
  stats_.data_share = rs.data_share();
  if (!std::isfinite(rs.threshold()) || rs.threshold() < 0.0) {
    // The push goes out under the threshold in force.
    refuse("round start threshold must be finite and >= 0, got " + std::to_string(rs.threshold()));
  } else if (rs.threshold() > 0.0) {
    try {
      push_->setThreshold(rs.threshold());
    } catch (const std::exception& e) {
      refuse(std::string("bad threshold in round start: ") + e.what());
    }
  }
}

Effects WorkerCore::handleRoundStart(const Message& msg, double now) {
  const auto& rs = msg.envelope.round_start();
  std::string error;
  switch (replica_.takeRoundModel(rs, msg.payload, error)) {
    case Replica::Sync::refused:
      return effects(refuse(error));
    case Replica::Sync::rejoin:
      spdlog::warn("round {} starts, but the replica is at round {}: re-joining", rs.round(),
                   replica_.round());
      ++stats_.rejoins;
      return effects(join(now));
    case Replica::Sync::done:
      break;
  }
  link_.atRound(rs.round());
  takeRoundSettings(rs);
  // A step that is no step leaves the tuner at the paper's, and the push goes out all the same.
  const bool lr_ok = std::isfinite(rs.learning_rate()) && rs.learning_rate() >= 0.0;
  if (!lr_ok)
    refuse("round start learning rate must be finite and >= 0, got " +
           std::to_string(rs.learning_rate()));
  // What the coordinator said is left of the round's deadline (a worker admitted mid-round has
  // less than the whole); not said or not a time: the welcome's deadline.
  push_->roundStarts(now, saidTime(rs.deadline_seconds_left()),
                     lr_ok ? std::optional(rs.learning_rate()) : std::nullopt);
  // A round start for the round just pushed, with nothing to apply, asks again: that push was
  // refused and never applied.
  const bool again = pushed_round_ == rs.round() && msg.payload.empty() && !rs.full_model();
  if (again) spdlog::warn("coordinator asks for round {} again: its push was refused", rs.round());
  if (stopping_) return effects();
  pending_ = Pending{++requests_, rs.round(), now, again};
  Effects out = effects();
  out.compute = GradientRequest{pending_->id, rs.round(), id(),         replica_.lend(),
                                model_,       plan_,      rs.evaluate()};
  if (failed_round_ == rs.round()) out.compute->attempt = failed_attempts_;
  out.compute->deadline_seconds = roundDeadline();
  return out;
}

Effects WorkerCore::onGradient(const GradientResult& result, double now) {
  if (!pending_ || pending_->id != result.request_id) return effects();
  const Pending asked = *pending_;
  pending_.reset();
  if (std::string why = resultProblem(result); !why.empty()) return sitOut(asked.round, why, now);
  if (asked.again) ++stats_.repushes;
  Message m = proto::pushMessage(session_.address(), asked.round);
  m.envelope.mutable_push()->set_samples_used(result.rows_used);
  if (const auto& e = result.evaluation; e && !ml::usableScores(e->loss, e->accuracy)) {
    // The evaluation alone is dropped; the gradient still goes (docs/python.md).
    if (countAndSayNow(stats_.evaluations_unusable))
      spdlog::warn(
          "round {}: the trainer's evaluation is not a finite loss and an accuracy in "
          "[0, 1] (accuracy {}): not reported ({} so far)",
          asked.round, e->accuracy, stats_.evaluations_unusable);
  } else if (e && e->rows > 0) {
    auto* ev = m.envelope.mutable_push()->mutable_evaluation();
    ev->set_round(asked.round);
    ev->set_loss(e->loss);
    ev->set_accuracy(e->accuracy);
    ev->set_rows(e->rows);
    ++stats_.evaluations;
    stats_.last_eval_round = asked.round;
    stats_.last_eval_loss = e->loss;
    stats_.last_eval_accuracy = e->accuracy;
    stats_.last_eval_rows = e->rows;
  }
  if (auto report = link_report_.forPush(asked.round, link_.toWire()))
    *m.envelope.mutable_push()->mutable_link() = std::move(*report);
  const auto built = push_->build(m, result.gradient, result.loss, asked.again, cap_, link_, now,
                                  now - asked.asked_at, rng_, stats_);
  // A push without a gradient is refused at once, not acked: neither timed nor led by a probe.
  if (!built.computed) {
    noteFailed(asked.round);
    return effects({sendable(std::move(m), now)});
  }
  pushed_round_ = asked.round;
  // A queued probe goes out right before the push, once the push is computed, and only when
  // nothing else is unacknowledged (see LinkMonitor::acked), and only if the push's deadline
  // budget counted it (one that became sendable since would make the push late).
  std::vector<Message> out;
  if (built.probe_ok) out = nextProbe(now);
  link_.issued(LinkMonitor::pushKey(asked.round), now);
  out.push_back(sendable(std::move(m), now));
  return effects(std::move(out));
}

std::string WorkerCore::resultProblem(const GradientResult& result) const {
  if (!result.failure.empty()) return result.failure;
  if (result.gradient.size() != replica_.params().size()) {
    return "the trainer's gradient has " + std::to_string(result.gradient.size()) +
           " values, the model " + std::to_string(replica_.params().size());
  }
  // A built-in model's overflow is the push builder's to report (a push that carries nothing);
  // an external trainer's non-finite answer is its failure.
  if (data_.external() && !std::isfinite(result.loss)) return "the trainer's loss is not finite";
  if (data_.external() && !compression::detail::allFinite(result.gradient)) {
    return "the trainer's gradient holds a non-finite value";
  }
  return "";
}

namespace {
// At most `most` bytes of `text`, cut before a UTF-8 character, never inside one (a protobuf
// string must stay valid UTF-8 for the coordinator to parse the message).
std::string utf8Prefix(const std::string& text, size_t most) {
  if (text.size() <= most) return text;
  size_t cut = most;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}
}  // namespace

void WorkerCore::noteFailed(uint64_t round) {
  failed_attempts_ = failed_round_ == round ? failed_attempts_ + 1 : 1;
  failed_round_ = round;
}

Effects WorkerCore::sitOut(uint64_t round, const std::string& why, double now) {
  ++stats_.trainer_failures;
  stats_.last_trainer_error = why;
  noteFailed(round);
  spdlog::warn("round {}: the trainer failed ({}); sitting the round out", round, why);
  if (stopping_) return effects();
  // Said to the coordinator with a push that carries nothing: it refuses it at once, so the round
  // need not wait for this worker, and asks again at the deadline when nobody else could push.
  Message m = proto::pushMessage(session_.address(), round);
  auto* p = m.envelope.mutable_push();
  p->set_local_loss(std::numeric_limits<double>::quiet_NaN());  // what an older coordinator reads
  p->set_failure(utf8Prefix(why, 256));
  return effects({sendable(std::move(m), now)});
}

std::vector<Message> WorkerCore::nextProbe(double now) {
  auto bytes = link_.nextProbe(now);
  if (!bytes) return {};
  const uint64_t probe_id = link_.nextProbeId();
  // The planned size is what goes on the wire, envelope and frame headers included, so that a
  // one-packet probe fills one packet and no more; never more than the coordinator takes in one
  // message part (the sample is timed at the size sent).
  auto& filler = *options_.probe_filler;
  const size_t envelope =
      proto::probeMessage(session_.address(), replica_.round(), probe_id, 0, filler)
          .envelope.ByteSizeLong();
  size_t payload = zmtpPayloadFor(*bytes, envelope);
  if (peer_max_bytes_) payload = size_t(std::min<uint64_t>(payload, *peer_max_bytes_));
  link_.issued(LinkMonitor::probeKey(probe_id), now);
  return {sendable(
      proto::probeMessage(session_.address(), replica_.round(), probe_id, payload, filler), now)};
}

const std::vector<float>& WorkerCore::residual() const {
  static const std::vector<float> none;
  return push_ ? push_->residual() : none;
}

void WorkerCore::onSent(const Message& msg, size_t wire_bytes, double now) {
  const auto push = proto::parsePush(msg);
  if (!push) return;
  const uint64_t key =
      push->probe ? LinkMonitor::probeKey(push->probe_id) : LinkMonitor::pushKey(push->round);
  (push->probe ? stats_.probe_bytes : stats_.pushed_bytes) += wire_bytes;
  // wire_bytes are the frames' contents; the link carries their ZMTP headers too.
  const size_t payload = std::min(msg.payload.size(), wire_bytes);
  link_.sent(key, zmtpWireBytes(wire_bytes - payload, payload), now);
}

Effects WorkerCore::onTick(double now) {
  if (finished_) return effects();
  switch (session_.due(now)) {
    case Session::Due::retry_join:
      return effects(join(now));
    case Session::Due::silent_rejoin:
      spdlog::warn("coordinator silent for {:.1f} s: re-joining", now - session_.lastHeard());
      ++stats_.rejoins;
      session_.silentRejoin();
      return effects(join(now));
    case Session::Due::heartbeat:
      return effects(
          {sendable(proto::heartbeatMessage(session_.address(), replica_.round()), now)});
    case Session::Due::nothing:
      break;
  }
  return effects();
}

}  // namespace tern::worker
