#include "worker/worker_core.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/compression/codec.hpp"
#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/util/checksum.hpp"
#include "common/util/printable.hpp"

namespace tern::worker {

namespace {

// The largest level in [1, dim] whose push stays within `max_bytes` by the codec's bound; 0 when
// not even one coordinate does. A count of dim needs no index section, so its bound can be below
// that of dim - 1: a count is sized at the larger of the two, which keeps the size monotone in
// the count. Stochastic sparsification sends a random count near `level`: its level is sized
// with room for 6 standard deviations and a few more. The hard threshold takes the level as a
// limit on its count. A compressor whose count the level does not bound is sized at its largest
// push.
uint32_t largestFittingLevel(const compression::Compressor& c, const std::string& name,
                             uint32_t dim, uint64_t max_bytes) {
  auto size = [&](uint32_t count) {
    size_t bytes = c.encodedBytes(dim, count);
    if (count == dim && dim >= 2) bytes = std::max(bytes, c.encodedBytes(dim, dim - 1));
    return bytes;
  };
  if (!c.levelLimitsCount()) return size(dim) <= max_bytes ? dim : 0;
  const bool random_count = name == "stochastic";
  auto fits = [&](uint32_t level) {
    uint32_t count = level;
    if (random_count) {
      const double spread = std::ceil(6.0 * std::sqrt(double(level))) + 8.0;
      count = uint32_t(std::min<double>(dim, double(level) + spread));
    }
    return size(count) <= max_bytes;
  };
  if (!fits(1)) return 0;
  uint32_t lo = 1, hi = dim;  // fits(lo); the answer is in [lo, hi]
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

WorkerCore::WorkerCore(const config::WorkerSettings& settings,
                       std::shared_ptr<const ml::Dataset> shard, Clock clock, uint64_t instance)
    : settings_(settings),
      shard_(std::move(shard)),
      clock_(std::move(clock)),
      link_(std::make_unique<LinkMonitor>(settings.link, settings.coordinator_patience_seconds)),
      instance_(instance) {
  heartbeat_ = settings.heartbeat_seconds;
  patience_ = settings.coordinator_patience_seconds;
}

WorkerCore::~WorkerCore() = default;

Message WorkerCore::sendable(Message m) {
  last_sent_ = clock_();
  return m;
}

std::vector<Message> WorkerCore::start() { return join(); }

std::vector<Message> WorkerCore::stop(const std::string& reason) {
  if (!joined_ || finished_) return {};
  auto leave = leaveMessage(id_, session_, reason);
  leave_unanswered_ = acks_leave_;
  return {std::move(leave)};
}

void WorkerCore::noteLeaveAnswer(const wire::Envelope& env) {
  if (!leave_unanswered_) return;
  // The Leave's ack; a Finish (a finished coordinator answers no Leave: the Finish came first);
  // or a coordinator that does not know this worker (any more) or has finished, which refuses
  // the Leave too. A refused push is not the Leave's answer.
  const bool refused = env.has_error() && !env.error().about_push() &&
                       (env.error().code() == wire::Error::UNKNOWN_SESSION ||
                        env.error().code() == wire::Error::SHUTTING_DOWN);
  if ((env.has_ack() && env.ack().leave()) || env.has_finish() || refused)
    leave_unanswered_ = false;
}

std::vector<Message> WorkerCore::afterStop(const Message& msg, size_t wire_bytes) {
  const auto& env = msg.envelope;
  if (env.version() != wire::PROTOCOL_VERSION) return {};
  noteLeaveAnswer(env);
  switch (env.body_case()) {
    case wire::Envelope::kAck:
      // A push's ack still times the link (the fit is printed at exit).
      if (env.ack().leave()) {
        stats_.received_bytes += wire_bytes;
      } else {
        onMessage(msg, wire_bytes);
      }
      return {};
    case wire::Envelope::kFinish:
      // The last update goes into the replica; the Leave that went out answers the Finish too.
      onMessage(msg, wire_bytes);
      return {};
    case wire::Envelope::kError: {
      // Logged, not acted on: a refused push is not taken back, nothing more goes out.
      const auto& e = env.error();
      stats_.received_bytes += wire_bytes;
      spdlog::warn("coordinator error {}: {}", int(e.code()), printable(e.text()));
      return {};
    }
    case wire::Envelope::kRoundStart: {
      // The round's update goes into the replica (the coordinator counts this worker as having
      // it, and a Finish after it carries no step), but no gradient is computed for it.
      stats_.received_bytes += wire_bytes;
      std::string error;
      if (joined_ && env.round_start().session() == session_ &&
          takeRoundModel(msg, error) == Sync::refused)
        refuse(error);
      return {};
    }
    default:
      // Nothing new starts after a stop: no gradient, no re-join.
      stats_.received_bytes += wire_bytes;
      return {};
  }
}

Message WorkerCore::leaveMessage(uint32_t id, uint64_t session, const std::string& reason) {
  Message m;
  m.envelope = makeEnvelope();
  auto* leave = m.envelope.mutable_leave();
  leave->set_worker_id(id);
  leave->set_session(session);
  leave->set_reason(reason);
  return sendable(std::move(m));
}

bool WorkerCore::errorFeedbackOn() const {
  if (!settings_.error_feedback_auto) return settings_.error_feedback;
  const auto& n = settings_.compressor.name;
  return !(n == "randomk" || n == "stochastic" || n == "qsgd");
}

std::vector<Message> WorkerCore::join() {
  joined_ = false;
  join_refused_ = false;
  leave_unanswered_ = false;  // a Leave before this join no longer holds anything back
  join_sent_ = clock_();
  last_heard_ = join_sent_;
  retry_join_at_ = 0.0;
  Message m;
  m.envelope = makeEnvelope();
  auto* j = m.envelope.mutable_join();
  j->set_worker_name(settings_.name);
  j->set_join_nonce(++join_nonce_);
  j->set_instance(instance_);
  j->set_max_message_bytes(settings_.max_message_bytes);
  if (partition_fingerprint_ != 0) {
    j->set_partition_fingerprint(partition_fingerprint_);
    j->set_shard_index(uint32_t(settings_.shard_index));
    j->set_shard_total(uint32_t(settings_.shard_total));
  }
  j->set_acks_finish(true);
  // What this process has measured of its link (the fit survives a re-join).
  if (link_->samples() > 0) *j->mutable_link() = link_->toWire();
  // The replica it holds, which may spare the coordinator sending the whole model again.
  announced_checksum_ = params_.empty() ? 0 : checksum(params_);
  if (announced_checksum_ != 0) {
    j->set_replica_round(replica_round_);
    j->set_replica_checksum(announced_checksum_);
  }
  j->set_sample_count(shard_->rows());
  std::vector<uint64_t> hist(size_t(std::max(shard_->num_classes, 1)), 0);
  for (int32_t l : shard_->labels) {
    if (l >= 0 && size_t(l) < hist.size()) ++hist[size_t(l)];
  }
  for (size_t c = 0; c < hist.size(); ++c) {
    auto* lc = j->add_label_histogram();
    lc->set_label(int32_t(c));
    lc->set_count(hist[c]);
  }
  for (const auto& n : compression::compressorNames()) j->add_compressors(n);
  j->set_error_feedback(errorFeedbackOn());
  return {sendable(std::move(m))};
}

std::vector<Message> WorkerCore::refuse(const std::string& why) {
  ++stats_.rejected;
  spdlog::warn("refused a coordinator message: {}", why);
  return {};
}

std::vector<Message> WorkerCore::onMessage(const Message& msg, size_t wire_bytes) {
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
      return {};
    }
    return refuse("protocol version mismatch");
  }
  last_heard_ = clock_();
  silence_factor_ = 1.0;
  noteLeaveAnswer(env);
  switch (env.body_case()) {
    case wire::Envelope::kWelcome:
      return handleWelcome(msg);
    case wire::Envelope::kRoundStart:
      if (!joined_ || env.round_start().session() != session_)
        return refuse("round before welcome");
      return handleRoundStart(msg);
    case wire::Envelope::kAck: {
      const auto& a = env.ack();
      if (a.leave()) return {};  // a Leave's answer (noteLeaveAnswer)
      uint64_t key =
          a.probe() ? LinkMonitor::probeKey(a.probe_id()) : LinkMonitor::pushKey(a.round());
      const double now = clock_();
      if (!std::isfinite(a.hold_seconds()) || a.hold_seconds() < 0.0)
        refuse("ack with hold time " + std::to_string(a.hold_seconds()));  // not timed
      link_->acked(key, a.hold_seconds(), now);
      // Exploration is decided on the push's ack, with that push's time in the fit; the probe
      // goes out ahead of the next push.
      if (joined_ && !a.probe()) link_->queueExploration(now);
      return {};
    }
    case wire::Envelope::kHeartbeat:
      if (joined_ && env.heartbeat().session() != session_) {
        spdlog::warn("coordinator reports a new session: re-joining");
        ++stats_.rejoins;
        return join();
      }
      return {};
    case wire::Envelope::kFinish:
      if (joined_ && !msg.payload.empty() && replica_round_ + 1 == env.finish().round()) {
        std::string error;
        if (applyUpdate(msg.payload, error)) {
          replica_round_ = env.finish().round();
        } else {
          refuse("bad final update: " + error);
        }
      }
      if (env.finish().has_test_accuracy()) {
        spdlog::info("coordinator finished training at round {} (test accuracy {:.4f})",
                     env.finish().round(), env.finish().test_accuracy());
      } else {
        spdlog::info("coordinator finished training at round {} (nothing evaluated)",
                     env.finish().round());
      }
      finished_ = true;
      // The coordinator waits for this before it exits: a Finish still on its way (the last
      // update on a slow downlink) is not cut off by the coordinator's exit.
      if (joined_) return {leaveMessage(id_, session_, "finished")};
      return {};
    case wire::Envelope::kError: {
      const auto& e = env.error();
      spdlog::warn("coordinator error {}: {}", int(e.code()), printable(e.text()));
      // A push refused as late or from a worker marked gone is refused as it arrives: the
      // refusal times it as an ack would (a slow push refused every time is how its link gets
      // measured at all). A bad payload's refusal may wait for the round's close: not timed;
      // nor a push refused by a coordinator of another session than the one it was sent to (it
      // queued while the coordinator restarted).
      const bool same_coordinator = e.session() == 0 || e.session() == session_;
      if (e.about_push() && (e.code() == wire::Error::BAD_ROUND ||
                             (e.code() == wire::Error::UNKNOWN_SESSION && same_coordinator)))
        link_->acked(LinkMonitor::pushKey(e.round()), 0.0, clock_());
      if (e.code() == wire::Error::UNKNOWN_SESSION) {
        // A restarted coordinator refuses, one by one, every message that queued up while it was
        // away; one join answers them all. A join that gets no welcome is retried on silence.
        if (!joined_ && clock_() - join_sent_ < patience_) return {};
        ++stats_.rejoins;
        return join();
      }
      if (e.code() == wire::Error::MESSAGE_LIMIT) {
        // The model will not fit however often this worker asks: a configuration to change.
        fatal_ = "the coordinator refused this worker: " + printable(e.text());
        finished_ = true;
        return {};
      }
      if (e.code() == wire::Error::TOO_MANY_WORKERS && !joined_) {
        // A full table frees up as gone workers are forgotten: ask again now and then.
        spdlog::error("the coordinator admits no more workers now: {}", printable(e.text()));
        retry_join_at_ = clock_() + std::max(10.0, settings_.heartbeat_seconds);
        join_refused_ = true;
        return {};
      }
      if (e.code() == wire::Error::PARTITION_MISMATCH && !joined_) {
        // The live workers cut their shards from another partition: this worker's configuration
        // or theirs is wrong (or a change is rolling through the fleet). It is admitted once no
        // worker of the other partition is live: ask again now and then, saying why each time.
        spdlog::error("the coordinator refused this worker's shard: {}", printable(e.text()));
        retry_join_at_ = clock_() + std::max(10.0, settings_.heartbeat_seconds);
        join_refused_ = true;
        return {};
      }
      if (e.code() == wire::Error::NAME_TAKEN && !joined_) {
        // Another process holds the name; it is free again once the coordinator marks it gone.
        spdlog::error("the coordinator refused the name '{}': {}", settings_.name,
                      printable(e.text()));
        retry_join_at_ = clock_() + std::max(1.0, settings_.heartbeat_seconds);
        join_refused_ = true;
        return {};
      }
      if (e.code() == wire::Error::SHUTTING_DOWN) finished_ = true;
      // A push refused (late, or with a bad payload): what it carried is owed again.
      if (e.about_push()) takeBack(e.round());
      return {};
    }
    default:
      return refuse("unexpected message type");
  }
}

std::vector<Message> WorkerCore::handleWelcome(const Message& msg) {
  const auto& w = msg.envelope.welcome();
  // A welcome answering an earlier join (several went out while the link was down) is ignored:
  // taking each would reset the worker once per welcome and push the same round once per reset.
  // The round starts that follow the stale welcomes are refused as arriving before a welcome.
  if (w.join_nonce() != 0 && w.join_nonce() != join_nonce_) {
    ++stats_.stale_welcomes;
    spdlog::debug("ignored a welcome answering an earlier join ({} of {})", w.join_nonce(),
                  join_nonce_);
    return {};
  }
  // A welcome this worker cannot train under is refused, and the coordinator is told so it does
  // not wait for pushes that will never come (it will be welcomed again after a re-join).
  enum class Then { rejoin, ask_later, give_up };
  auto refuseWelcome = [&](const std::string& why, Then then = Then::rejoin) {
    refuse(why);
    if (then == Then::give_up) {
      // The shard itself is at fault: no coordinator can change that.
      fatal_ = why;
      finished_ = true;
    } else if (then == Then::ask_later) {
      // A model that does not fit this shard (features, labels): the coordinator's configuration
      // or this worker's data is wrong, and either may be mended without touching the other
      // (a fleet must not stay down for a typo at the coordinator). Each ask costs a welcome of
      // the whole model: after 30 s, then twice as long each time, up to 10 minutes.
      const double wait = std::min(600.0, 30.0 * std::pow(2.0, double(unfit_welcomes_)));
      ++unfit_welcomes_;
      unfit_welcome_ = why;
      spdlog::error("cannot train the coordinator's model: {}; asking again in {:g} s", why, wait);
      retry_join_at_ = clock_() + wait;
      join_refused_ = true;
    }
    auto leave = leaveMessage(w.worker_id(), w.session(), "cannot train: " + why);
    leave_unanswered_ = w.acks_leave();
    return std::vector<Message>{std::move(leave)};
  };
  ml::ModelSpec spec;
  spec.kind = w.model().kind();
  spec.features = w.model().features();
  spec.classes = w.model().classes();
  spec.hidden = w.model().hidden();
  spec.l2 = w.model().l2();
  if (spec.features != shard_->features()) {
    return refuseWelcome("model expects " + std::to_string(spec.features) +
                             " features, shard has " + std::to_string(shard_->features()),
                         Then::ask_later);
  }
  if (w.training().batch_size() == 0) return refuseWelcome("training settings have batch size 0");
  if (w.training().local_steps() > config::kMaxLocalSteps) {
    return refuseWelcome("training settings ask for " + std::to_string(w.training().local_steps()) +
                         " local steps, more than " + std::to_string(config::kMaxLocalSteps));
  }
  if (w.training().local_steps() > 1 &&
      !(std::isfinite(w.training().local_lr()) && w.training().local_lr() > 0.0)) {
    return refuseWelcome("training settings have local steps with local_lr " +
                         std::to_string(w.training().local_lr()));
  }
  // A spec no model can be made from is the coordinator's message at fault (refused); only a
  // valid model that cannot learn this shard's labels ends the worker.
  std::unique_ptr<ml::Model> model;
  try {
    model = ml::makeModel(spec);
  } catch (const std::exception& e) {
    return refuseWelcome(std::string("bad model spec: ") + e.what());
  }
  if (std::string why = ml::labelsUnfit(spec, *shard_); !why.empty()) {
    return refuseWelcome("the coordinator's model cannot train on this shard: " + why,
                         Then::ask_later);
  }
  std::vector<float> params;
  if (w.model_payload() == wire::Welcome::FULL_MODEL) {
    // The size is checked before anything is allocated for the parameters.
    if (msg.payload.size() != model->numParams() * sizeof(float))
      return refuseWelcome("welcome payload has " + std::to_string(msg.payload.size()) +
                           " bytes, the model's parameters need " +
                           std::to_string(model->numParams() * sizeof(float)));
    params.resize(model->numParams());
    [[maybe_unused]] const bool copied = bytesToFloats(msg.payload, params);  // size checked
    if (!compression::detail::allFinite(params))
      return refuseWelcome("welcome parameters hold a non-finite value");
  } else {
    // The replica this worker's join named, as it stands (or with the round's update): the
    // coordinator matched its checksum, and the replica has not changed since the join.
    const bool update = w.model_payload() == wire::Welcome::REPLICA_UPDATE;
    const uint64_t round = replica_round_ + (update ? 1 : 0);
    std::string error;
    if (announced_checksum_ == 0 || params_.size() != model->numParams() ||
        checksum(params_) != announced_checksum_) {
      error = "it holds no such replica";
    } else if (w.model_payload() != wire::Welcome::REPLICA_CURRENT && !update) {
      error = "unknown model payload " + std::to_string(int(w.model_payload()));
    } else if (!update && !msg.payload.empty()) {
      error = "it carries " + std::to_string(msg.payload.size()) + " bytes all the same";
    } else if (w.round() != round) {
      error = "its replica is at round " + std::to_string(replica_round_) +
              ", the welcome's model at " + std::to_string(w.round());
    } else {
      params = params_;
      if (update && !applyUpdateTo(msg.payload, params, error)) error = "bad update: " + error;
    }
    if (!error.empty()) {
      // Asked again at once (unless stopping), naming no replica: the whole model comes.
      params_.clear();
      auto out = refuseWelcome("welcome without the whole model, but " + error);
      if (stopping()) return out;
      ++stats_.rejoins;
      for (auto& m : join()) out.push_back(std::move(m));
      return out;
    }
  }
  if (!std::isfinite(w.threshold()) || w.threshold() < 0.0)
    return refuseWelcome("welcome threshold must be finite and >= 0, got " +
                         std::to_string(w.threshold()));
  const std::optional<double> bound = model->smoothness(*shard_);
  const double smoothness = bound.value_or(1.0);
  if (!std::isfinite(smoothness) || !(smoothness > 0.0)) {
    return refuseWelcome("the shard's smoothness bound is " + std::to_string(smoothness) +
                             " (a feature too large for its type?)",
                         Then::give_up);
  }
  compression::CompressorSpec cspec = settings_.compressor;
  if (w.threshold() > 0.0) cspec.threshold = w.threshold();
  std::unique_ptr<compression::ErrorFeedback> compressor;
  std::unique_ptr<LevelPolicy> policy;
  try {
    compressor = std::make_unique<compression::ErrorFeedback>(compression::makeCompressor(cspec),
                                                              errorFeedbackOn());
    policy =
        std::make_unique<LevelPolicy>(settings_.tuning, settings_.link.packet_bytes, smoothness);
  } catch (const std::exception& e) {
    return refuseWelcome(std::string("cannot compress as welcomed: ") + e.what());
  }
  // Pushes must fit in the coordinator's largest message: the level is capped so that the
  // codec's bound holds (a threshold push keeps its largest coordinates up to that count, the
  // rest staying in the residual). A fixed scheme (identity, fp16, qsgd) that cannot fit never
  // will, and no re-join changes that.
  const uint64_t peer_max = w.max_message_bytes();
  uint32_t size_cap = UINT32_MAX;
  if (peer_max > 0) {
    const auto& inner = compressor->inner();
    const auto d = uint32_t(params.size());
    size_cap = largestFittingLevel(inner, cspec.name, d, peer_max);
    // The largest push: every coordinate, or one short of it (an index section).
    const size_t largest =
        std::max(inner.encodedBytes(d, d), inner.encodedBytes(d, d >= 2 ? d - 1 : d));
    if (size_cap > 0 && size_cap < d && cspec.name == "threshold") {
      spdlog::warn(
          "a threshold push of this model can take up to {} bytes, more than the coordinator's "
          "max_message_bytes of {}: pushes denser than {} coordinates send their largest {}{}",
          largest, peer_max, size_cap, size_cap,
          errorFeedbackOn() ? " and keep the rest in the residual" : " and drop the rest");
    } else if (size_cap == 0) {
      return refuseWelcome("a push of compressor '" + cspec.name +
                               "' does not fit in the coordinator's max_message_bytes of " +
                               std::to_string(peer_max) + " (this model's takes up to " +
                               std::to_string(largest) +
                               " bytes): raise it there, or choose a compressor that sends fewer",
                           Then::ask_later);
    }
  }
  model_ = std::move(model);
  peer_max_bytes_ = peer_max;
  size_cap_ = size_cap;
  smoothness_ = smoothness;
  smoothness_known_ = bound.has_value();
  params_ = std::move(params);
  id_ = w.worker_id();
  session_ = w.session();
  replica_round_ = w.round();
  cap_ = w.cap();
  threshold_ = w.threshold();
  stats_.data_share = w.data_share();
  training_ = w.training();
  rng_.seed(deriveSeed(training_.seed(), 0x776f726b6572ULL + id_));

  // The residual starts empty on every (re-)join: it belonged to a model the coordinator may no
  // longer hold.
  compressor_ = std::move(compressor);
  if (policy_) policy->keepFitOf(*policy_);  // the link survives a re-join, and so does its fit
  policy_ = std::move(policy);
  link_->reset();
  pushed_round_ = -1;
  sent_.clear();
  joined_ = true;
  unfit_welcomes_ = 0;
  unfit_welcome_.clear();
  // Silences from now on are judged by connections made after this welcome's.
  connected_since_join_ = false;
  fitTimersTo(w.heartbeat_seconds(), w.worker_patience_seconds());
  // A deadline that is no deadline (not finite, negative) is taken as not said.
  round_deadline_ = std::isfinite(w.round_deadline_seconds()) && w.round_deadline_seconds() > 0.0
                        ? w.round_deadline_seconds()
                        : 0.0;
  acks_leave_ = w.acks_leave();
  spdlog::info("joined as worker {} (session {:x}), cap {}, round {}", id_, session_, cap_,
               replica_round_);

  // The train goes out one probe ahead of each push (see handleRoundStart).
  link_->queueCalibration();
  return {};
}

Message WorkerCore::pushFor(uint64_t round) const {
  Message m;
  m.envelope = makeEnvelope();
  auto* push = m.envelope.mutable_push();
  push->set_session(session_);
  push->set_worker_id(id_);
  push->set_round(round);
  return m;
}

std::vector<Message> WorkerCore::nextProbe() {
  const double now = clock_();
  auto bytes = link_->nextProbe(now);
  if (!bytes) return {};
  Message p = pushFor(replica_round_);
  auto* push = p.envelope.mutable_push();
  push->set_probe(true);
  push->set_probe_id(link_->nextProbeId());
  // The planned size is what goes on the wire, envelope and frame headers included, so that a
  // one-packet probe fills one packet and no more.
  // Never more than the coordinator takes in one message part (a train sized for a large
  // packet can ask for more): the sample is timed at the size sent.
  size_t payload = zmtpPayloadFor(*bytes, p.envelope.ByteSizeLong());
  if (peer_max_bytes_ > 0) payload = size_t(std::min<uint64_t>(payload, peer_max_bytes_));
  p.payload.assign(payload, 0x5a);
  link_->issued(LinkMonitor::probeKey(push->probe_id()), now);
  return {sendable(std::move(p))};
}

bool WorkerCore::applyUpdate(std::span<const uint8_t> payload, std::string& error) {
  return applyUpdateTo(payload, params_, error);
}

bool WorkerCore::applyUpdateTo(std::span<const uint8_t> payload, std::vector<float>& params,
                               std::string& error) const {
  compression::DecodeLimits limits;
  limits.expected_dim = uint32_t(params.size());
  limits.max_dim = uint32_t(params.size());
  limits.max_bytes = settings_.max_message_bytes;
  auto update = compression::decode(payload, limits);
  if (!update.value) {
    error = update.error;
    return false;
  }
  // Checked before anything is applied: a finite update can still overflow the replica.
  if (!compression::staysFinite(*update.value, 1.0f, params)) {
    error = "applying it would make the replica non-finite";
    return false;
  }
  compression::addScaled(*update.value, 1.0f, params);
  return true;
}

WorkerCore::Sync WorkerCore::takeRoundModel(const Message& msg, std::string& error) {
  const auto& rs = msg.envelope.round_start();
  if (rs.full_model()) {
    std::vector<float> model(params_.size());
    if (!bytesToFloats(msg.payload, model)) {
      error = "full model has the wrong size";
      return Sync::refused;
    }
    if (!compression::detail::allFinite(model)) {
      error = "full model holds a non-finite value";
      return Sync::refused;
    }
    params_ = std::move(model);
  } else if (!msg.payload.empty()) {
    // An update that does not apply to the replica held: the whole model is needed again.
    if (replica_round_ + 1 != rs.round()) return Sync::rejoin;
    if (!applyUpdate(msg.payload, error)) {
      error = "bad update: " + error;
      return Sync::refused;
    }
  } else if (replica_round_ != rs.round()) {
    return Sync::rejoin;
  }
  replica_round_ = rs.round();
  return Sync::done;
}

std::vector<Message> WorkerCore::handleRoundStart(const Message& msg) {
  const auto& rs = msg.envelope.round_start();
  round_started_at_ = clock_();
  // What the coordinator said is left of the round's deadline (a worker admitted mid-round has
  // less than the whole); not said or not a time: the welcome's deadline.
  round_deadline_left_ =
      std::isfinite(rs.deadline_seconds_left()) && rs.deadline_seconds_left() > 0.0
          ? rs.deadline_seconds_left()
          : 0.0;
  std::string error;
  switch (takeRoundModel(msg, error)) {
    case Sync::refused:
      return refuse(error);
    case Sync::rejoin:
      spdlog::warn("round {} starts, but the replica is at round {}: re-joining", rs.round(),
                   replica_round_);
      ++stats_.rejoins;
      return join();
    case Sync::done:
      break;
  }
  link_->atRound(rs.round());
  cap_ = rs.cap();
  stats_.data_share = rs.data_share();
  if (!std::isfinite(rs.threshold()) || rs.threshold() < 0.0) {
    // The push goes out under the threshold in force.
    refuse("round start threshold must be finite and >= 0, got " + std::to_string(rs.threshold()));
  } else if (rs.threshold() > 0.0 && rs.threshold() != threshold_) {
    compression::CompressorSpec cspec = settings_.compressor;
    cspec.threshold = rs.threshold();
    try {
      // A new threshold starts a new residual: the old one was shaped by the old threshold.
      compressor_ = std::make_unique<compression::ErrorFeedback>(compression::makeCompressor(cspec),
                                                                 errorFeedbackOn());
      threshold_ = rs.threshold();
    } catch (const std::exception& e) {
      refuse(std::string("bad threshold in round start: ") + e.what());
    }
  }
  // The tuner prices its levels at the step the coordinator applies (tuning.step: coordinator);
  // a step that is no step leaves it at the paper's, and the push goes out all the same.
  step_ = 0.0;
  if (!std::isfinite(rs.learning_rate()) || rs.learning_rate() < 0.0)
    refuse("round start learning rate must be finite and >= 0, got " +
           std::to_string(rs.learning_rate()));
  else if (settings_.tuning.step == "coordinator" ||
           (settings_.tuning.step == "auto" && smoothness_known_ &&
            rs.learning_rate() * smoothness_ < 2.0))
    step_ = rs.learning_rate();
  // A queued probe goes out right before the push, once the push is computed, and only when
  // nothing else is unacknowledged: it then starts on an idle link and its ack is read as soon as
  // it arrives, because the worker has nothing left to do but wait (an ack arriving while the
  // worker computes would be read late and inflate the time). The push follows it and is timed
  // from the probe's ack (see LinkMonitor::acked).
  // A round start for the round just pushed, with nothing to apply, asks again: that push was
  // refused and never applied.
  const bool again =
      int64_t(rs.round()) == pushed_round_ && msg.payload.empty() && !rs.full_model();
  if (again) spdlog::warn("coordinator asks for round {} again: its push was refused", rs.round());
  Push push = makePush(rs.round(), again);
  if (push.stopped) return {};
  if (again) ++stats_.repushes;
  // A push without a gradient is refused at once, not acked: neither timed nor led by a probe.
  if (!push.computed) return {std::move(push.message)};
  // A probe goes ahead only if the push's deadline budget counted it (one that became sendable
  // since, as an ack timed out, waits: the push behind it would be late).
  std::vector<Message> out;
  if (push.probe_ok) out = nextProbe();
  link_->issued(LinkMonitor::pushKey(rs.round()), clock_());
  out.push_back(std::move(push.message));
  return out;
}

std::optional<double> WorkerCore::batchGradient(std::span<const float> at,
                                                std::span<const size_t> rows,
                                                std::vector<float>& grad) {
  return ml::chunkedLossAndGradient(*model_, at, *shard_, rows, ml::chunkRows(params_.size()),
                                    batch_, chunk_grad_, grad, stop_check_);
}

bool WorkerCore::stopping() const { return stop_check_ && stop_check_(); }

bool WorkerCore::computeGradient(uint64_t round, std::vector<float>& grad, double& loss,
                                 uint64_t& used) {
  const size_t n = shard_->rows();
  const size_t batch = std::min<size_t>(training_.batch_size(), n);
  Rng rng(deriveSeed(training_.seed() ^ (uint64_t(id_) << 32), round));
  auto draw = [&] {
    std::vector<size_t> rows(batch);
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    for (auto& r : rows) r = pick(rng);
    return rows;
  };
  grad.assign(params_.size(), 0.0f);
  // A stop that came while the round start was on its way.
  if (stopping()) return false;
  const uint32_t steps = std::max<uint32_t>(1, training_.local_steps());
  if (steps == 1) {
    used = batch;
    const auto mean = batchGradient(params_, draw(), grad);
    if (mean) loss = *mean;
    return mean.has_value();
  }
  // Local SGD: the pushed "gradient" is the model delta divided by the local step size, so the
  // coordinator's learning rate keeps its meaning.
  std::vector<float> local = params_;
  std::vector<float> g(params_.size());
  loss = 0.0;
  for (uint32_t s = 0; s < steps; ++s) {
    if (s > 0 && stopping()) return false;
    const auto step_loss = batchGradient(local, draw(), g);
    if (!step_loss) return false;
    loss += *step_loss;
    for (size_t j = 0; j < local.size(); ++j) local[j] -= float(training_.local_lr()) * g[j];
  }
  loss /= steps;
  used = uint64_t(batch) * steps;
  for (size_t j = 0; j < local.size(); ++j) {
    grad[j] = float((params_[j] - local[j]) / training_.local_lr());
  }
  return true;
}

WorkerCore::Push WorkerCore::makePush(uint64_t round, bool again) {
  const double t0 = clock_();
  std::vector<float> grad;
  double loss = 0.0;
  uint64_t used = 0;
  if (!computeGradient(round, grad, loss, used)) {
    // The daemon is stopping: nothing goes out for this round, and its Leave follows.
    spdlog::info("round {}: the gradient was left unfinished: stopping", round);
    return Push{{}, false, true};
  }
  Message m = pushFor(round);
  auto* p = m.envelope.mutable_push();
  p->set_samples_used(used);
  *p->mutable_link() = link_->toWire();
  // An overflow (local steps with too large a local_lr, extreme data, a residual grown past a
  // float) must neither end the daemon (the compressors refuse non-finite values) nor reach the
  // residual. The worker says so with a push whose loss is not finite and carries nothing: the
  // coordinator refuses it at once, so the round need not wait for this worker, and asks again.
  auto failed = [&](const std::string& why) {
    ++stats_.non_finite_gradients;
    spdlog::warn("round {}: {}; pushing nothing", round, why);
    p->set_local_loss(std::numeric_limits<double>::quiet_NaN());
    p->set_compute_seconds(clock_() - t0);
    return Push{sendable(std::move(m)), false};
  };
  if (!std::isfinite(loss) ||
      !std::all_of(grad.begin(), grad.end(), [](float x) { return std::isfinite(x); }))
    return failed("the local loss or gradient is not finite (loss " + std::to_string(loss) + ")");
  // Asked again, the refused push is taken back (if its error has not done so already): the
  // residual then holds this round's gradient (the replica and the minibatch are the same) and
  // everything else still owed, and it goes out as it is, so the gradient is never added twice.
  // Without feedback the gradient is simply computed again.
  std::span<const float> v;
  if (again) {
    takeBack(round);
    v = compressor_->resendResidual(grad.size());
  }
  if (v.empty()) v = compressor_->corrected(grad);
  uint32_t cap = std::clamp<uint32_t>(std::min(cap_, size_cap_), 1, uint32_t(params_.size()));
  // What the push carries besides the codec's bytes: its envelope, with every report field
  // present (the level at its largest, the cap), and the two frames' headers (the payload's
  // long one). The link fit prices wire bytes, so the tuner must see these too: a level that
  // fills its last packet with codec bytes alone would spill into one more.
  p->set_local_loss(loss);
  p->set_compute_seconds(clock_() - t0);
  p->set_level(cap);
  p->set_predicted_cost(1.0);
  p->set_predicted_improvement(1.0);
  p->set_predicted_step(1.0);
  const size_t envelope_bytes = m.envelope.ByteSizeLong();
  const size_t overhead = zmtpWireBytes(envelope_bytes, 256) - 256;
  const auto& inner = compressor_->inner();
  // A push the link carries past the round's deadline misses its round: its level is held to
  // what arrives in time. The hard threshold's count follows the data: its level is the most a
  // push may carry.
  const uint32_t most =
      inner.hasLevel() ? cap : std::min<uint32_t>(size_cap_, uint32_t(params_.size()));
  const InTime in_time = inTime(most, overhead);
  if (inner.hasLevel()) cap = in_time.level;
  auto decision = policy_->choose(v, cap, inner, link_->fit(), overhead, step_);
  uint32_t level = std::clamp<uint32_t>(decision.level, 1, cap);
  const uint32_t limit = inner.hasLevel() ? level : in_time.level;
  compression::Compressed compressed;
  try {
    compressed = compressor_->compressCorrected(limit, rng_);
  } catch (const std::exception& e) {
    // The residual is written only after the compressor succeeds: it is as it was.
    return failed(e.what());
  }
  const auto* threshold = dynamic_cast<const compression::ThresholdCompressor*>(&inner);
  if (threshold != nullptr && threshold->lastPassed() > most) ++stats_.trimmed;
  if (in_time.bound) {
    const std::string rest =
        errorFeedbackOn() ? "the rest stays in the residual" : "the rest is dropped";
    if (!inner.levelLimitsCount()) {
      sayInTime(round, in_time, "a push of compressor '" + settings_.compressor.name + "'",
                in_time.seconds_at_most,
                "it goes whole, and late (a compressor with a level can send less)",
                ++stats_.deadline_late);
    } else if (threshold != nullptr && threshold->lastPassed() > in_time.level) {
      sayInTime(round, in_time,
                "a push of the " + std::to_string(threshold->lastPassed()) +
                    " coordinates over the threshold",
                in_time.seconds(double(overhead + inner.encodedBytes(uint32_t(params_.size()),
                                                                     threshold->lastPassed()))),
                "sending the largest " + std::to_string(in_time.level) + ", " + rest,
                ++stats_.deadline_trimmed);
    } else if (threshold == nullptr && level == in_time.level) {
      sayInTime(round, in_time, "a push at the cap of " + std::to_string(most) + " coordinates",
                in_time.seconds_at_most, "sending " + std::to_string(level) + ", " + rest,
                ++stats_.deadline_trimmed);
    }
  }
  stats_.last_level = level;
  // The tuner's predictions are for the level it chose; a level clamped into [1, cap] has none.
  const bool as_chosen = level == decision.level;
  stats_.last_predicted_cost = as_chosen ? decision.predicted_cost : 0.0;
  stats_.last_predicted_improvement = as_chosen ? decision.predicted_improvement : 0.0;
  stats_.last_step = as_chosen ? decision.step : 0.0;
  pushed_round_ = int64_t(round);
  if (compressor_->enabled()) {
    std::erase_if(sent_, [round](const auto& s) { return s.first == round; });
    sent_.emplace_back(round, compressed.decoded);
    while (sent_.size() > 2) sent_.pop_front();
  }
  stats_.last_loss = loss;
  ++stats_.rounds;

  p->set_local_loss(loss);
  p->set_compute_seconds(clock_() - t0);
  p->set_level(level);
  p->set_predicted_cost(stats_.last_predicted_cost);
  p->set_predicted_improvement(stats_.last_predicted_improvement);
  p->set_predicted_step(stats_.last_step);
  m.payload = std::move(compressed.bytes);
  return {sendable(std::move(m)), true, false, !in_time.bound || in_time.probe_ahead};
}

WorkerCore::InTime WorkerCore::inTime(uint32_t most, size_t overhead_bytes) {
  InTime t;
  t.level = most;
  const double deadline = round_deadline_left_ > 0.0 ? round_deadline_left_ : round_deadline_;
  if (deadline <= 0.0) return t;
  const std::optional<costmodel::LinkFit> fit = policy_->usableFit(link_->fit());
  if (!fit || !(fit->b > 0.0) || fit->packet_bytes == 0) return t;
  t.a = std::max(fit->a, 0.0);
  t.b = fit->b;
  t.packet_bytes = double(fit->packet_bytes);
  const auto& inner = compressor_->inner();
  const auto d = uint32_t(params_.size());
  // The deadline runs at the coordinator from when it sent the round start: its transit here
  // (with the update it carries) and the fit's error are not seen by this clock, so a fifth of
  // what is left is kept for them.
  constexpr double kDeadlineShare = 0.8;
  t.left = deadline - (clock_() - round_started_at_);
  t.budget = kDeadlineShare * t.left;
  const std::optional<size_t> probe = link_->peekProbe(clock_());
  if (probe) t.budget -= t.seconds(double(*probe));
  const double packets = std::floor((t.budget - t.a) / t.b);
  uint32_t level = 0;
  if (packets >= 1.0 && packets * t.packet_bytes > double(overhead_bytes)) {
    const double codec_bytes = std::min(packets * t.packet_bytes - double(overhead_bytes), 1e18);
    level = largestFittingLevel(inner, settings_.compressor.name, d, uint64_t(codec_bytes));
  }
  t.seconds_at_most = t.seconds(double(overhead_bytes + inner.encodedBytes(d, most)));
  t.probe_ahead = probe.has_value();
  if (level >= most) return t;
  t.bound = true;
  // A compressor without a level sends what it sends: the push goes whole, and late.
  if (inner.levelLimitsCount()) t.level = std::max<uint32_t>(level, 1);
  return t;
}

double WorkerCore::InTime::seconds(double wire_bytes) const {
  return a + b * std::ceil(wire_bytes / packet_bytes);
}

void WorkerCore::sayInTime(uint64_t round, const InTime& t, const std::string& what, double seconds,
                           const std::string& done, uint64_t count) {
  // Said on the first such push and every 100th after it: the journal is not flooded, and the
  // count is in the metrics.
  if (count != 1 && count % 100 != 0) return;
  spdlog::warn(
      "round {}: {} takes about {:.2f} s on this link, more than the {:.2f} s a push has (four "
      "fifths of the {:.2f} s left of the round's deadline{}): {} (raise round_deadline_seconds "
      "at the coordinator or lower the cap to avoid it; such pushes so far: {})",
      round, what, seconds, std::max(t.budget, 0.0), std::max(t.left, 0.0),
      t.probe_ahead ? ", less the probe ahead of it" : "", done, count);
}

const std::vector<float>& WorkerCore::residual() const {
  static const std::vector<float> none;
  return compressor_ ? compressor_->residual() : none;
}

void WorkerCore::takeBack(uint64_t round) {
  for (auto it = sent_.begin(); it != sent_.end(); ++it) {
    if (it->first != round) continue;
    // Never applied: what it carried is still owed, so the residual holds it again.
    if (compressor_->takeBack(it->second)) {
      ++stats_.taken_back;
      spdlog::info("push for round {} was refused: its content goes out with a later one", round);
    }
    sent_.erase(it);
    return;
  }
}

void WorkerCore::onSent(const Message& msg, size_t wire_bytes) {
  if (!msg.envelope.has_push()) return;
  const auto& p = msg.envelope.push();
  uint64_t key = p.probe() ? LinkMonitor::probeKey(p.probe_id()) : LinkMonitor::pushKey(p.round());
  if (p.probe()) {
    stats_.probe_bytes += wire_bytes;
  } else {
    stats_.pushed_bytes += wire_bytes;
  }
  // wire_bytes are the frames' contents; the link carries their ZMTP headers too.
  const size_t payload = std::min(msg.payload.size(), wire_bytes);
  link_->sent(key, zmtpWireBytes(wire_bytes - payload, payload), clock_());
}

std::vector<Message> WorkerCore::onTick() {
  if (finished_) return {};
  const double now = clock_();
  if (!joined_ && retry_join_at_ > 0.0 && now >= retry_join_at_) return join();
  // A join refused as unfit asks again when its retry falls due, however long the coordinator is
  // quiet (other refusals retry within the patience anyway).
  if (!joined_ && join_refused_ && retry_join_at_ > 0.0 && !unfit_welcome_.empty()) return {};
  if (now >= last_heard_ + silenceAllowed()) {
    spdlog::warn("coordinator silent for {:.1f} s: re-joining", now - last_heard_);
    ++stats_.rejoins;
    // Over a connection that came up since the last join the coordinator may be sending a frame
    // that takes longer than the patience (a large model's welcome or a dense update on a slow
    // downlink; the re-join's new connection drops what of it had come): the next wait is twice
    // as long, up to 8 times the patience. A connection that never came up (a cut link, a
    // blackhole) says nothing of the sort, and the patience stays as it is.
    silence_factor_ = connected_since_join_ ? std::min(8.0, 2.0 * silence_factor_) : 1.0;
    connected_since_join_ = false;
    return join();
  }
  if (joined_ && now >= last_sent_ + heartbeat_) return {sendable(*heartbeat())};
  return {};
}

std::optional<Message> WorkerCore::heartbeat() const {
  if (!joined_) return std::nullopt;
  Message m;
  m.envelope = makeEnvelope();
  auto* hb = m.envelope.mutable_heartbeat();
  hb->set_session(session_);
  hb->set_worker_id(id_);
  hb->set_round(replica_round_);
  return m;
}

void WorkerCore::fitTimersTo(double coordinator_heartbeat, double coordinator_patience) {
  // Each side's settings pass their own ranges, but only together do they work: a worker that
  // heartbeats less often than the coordinator's patience is marked gone between pushes, and one
  // whose patience is shorter than the coordinator's heartbeat re-joins (a whole model's welcome)
  // whenever a round is quiet. Values not said, or not finite and positive, change nothing.
  heartbeat_ = settings_.heartbeat_seconds;
  patience_ = settings_.coordinator_patience_seconds;
  auto said = [](double v) { return std::isfinite(v) && v > 0.0; };
  if (said(coordinator_patience) && heartbeat_ > coordinator_patience / 3.0) {
    // Not more often than every 10 ms, unless the settings ask for that.
    heartbeat_ = std::max(coordinator_patience / 3.0, std::min(heartbeat_, 0.01));
    spdlog::warn(
        "heartbeat_seconds {:g} is more than a third of the coordinator's worker patience of "
        "{:g} s: heartbeating every {:g} s",
        settings_.heartbeat_seconds, coordinator_patience, heartbeat_);
  }
  if (said(coordinator_heartbeat) && patience_ < 3.0 * coordinator_heartbeat) {
    patience_ = 3.0 * coordinator_heartbeat;
    spdlog::warn(
        "coordinator_patience_seconds {:g} is less than three of the coordinator's heartbeats "
        "of {:g} s: waiting {:g} s",
        settings_.coordinator_patience_seconds, coordinator_heartbeat, patience_);
  }
}

double WorkerCore::silenceAllowed() const { return patience_ * silence_factor_; }

void WorkerCore::connectionUp() {
  connected_since_join_ = true;
  if (!joined_ && join_refused_ && retry_join_at_ > 0.0) {
    // Within a second, spread by this process's instance so that a fleet refused together does
    // not ask (each for a whole model's welcome) at once.
    retry_join_at_ = std::min(retry_join_at_, clock_() + double(instance_ % 1000) / 1000.0);
  }
}

double WorkerCore::nextWakeup() const {
  if (!joined_ && join_refused_ && retry_join_at_ > 0.0 && !unfit_welcome_.empty()) {
    return retry_join_at_;
  }
  double t = last_heard_ + silenceAllowed();
  if (joined_) t = std::min(t, last_sent_ + heartbeat_);
  if (!joined_ && retry_join_at_ > 0.0) t = std::min(t, retry_join_at_);
  return t;
}

}  // namespace tern::worker
