#include "worker/session.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace tern::worker {

Session::Session(double heartbeat_seconds, double patience_seconds)
    : heartbeat_seconds_(heartbeat_seconds),
      patience_seconds_(patience_seconds),
      heartbeat_(heartbeat_seconds),
      patience_(patience_seconds) {}

uint64_t Session::joining(double now) {
  standing_ = Standing::joining;
  leave_unanswered_ = false;  // a Leave before this join no longer holds anything back
  join_sent_ = now;
  last_heard_ = now;
  retry_join_at_.reset();
  return ++join_nonce_;
}

void Session::welcomed(const proto::WorkerAddress& address, bool acks_leave,
                       double coordinator_heartbeat, double coordinator_patience) {
  address_ = address;
  standing_ = Standing::joined;
  unfit_welcomes_ = 0;
  unfit_welcome_.clear();
  refusal_.clear();
  // Silences from now on are judged by connections made after this welcome's.
  connected_since_join_ = false;
  fitTimersTo(coordinator_heartbeat, coordinator_patience);
  acks_leave_ = acks_leave;
}

void Session::refusedUntil(double at, const std::string& why) {
  retry_join_at_ = at;
  standing_ = Standing::refused;
  refusal_ = why;
}

double Session::unfit(const std::string& why, double now) {
  // Each ask costs a welcome of the whole model: after 30 s, then twice as long each time, up to
  // 10 minutes.
  const double wait = std::min(600.0, 30.0 * std::pow(2.0, double(unfit_welcomes_)));
  ++unfit_welcomes_;
  unfit_welcome_ = why;
  refusedUntil(now + wait, why);
  return wait;
}

void Session::heard(double now) {
  last_heard_ = now;
  silence_factor_ = 1.0;
}

void Session::noteLeaveAnswer(const wire::Envelope& env) {
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

Session::Due Session::due(double now) const {
  if (!joined() && retry_join_at_ && now >= *retry_join_at_) return Due::retry_join;
  // A join refused as unfit asks again when its retry falls due, however long the coordinator is
  // quiet (other refusals retry within the patience anyway).
  if (standing_ == Standing::refused && retry_join_at_ && !unfit_welcome_.empty())
    return Due::nothing;
  if (now >= last_heard_ + silenceAllowed()) return Due::silent_rejoin;
  if (joined() && now >= last_sent_ + heartbeat_) return Due::heartbeat;
  return Due::nothing;
}

void Session::silentRejoin() {
  // Over a connection that came up since the last join the coordinator may be sending a frame
  // that takes longer than the patience (a large model's welcome or a dense update on a slow
  // downlink; the re-join's new connection drops what of it had come): the next wait is twice as
  // long, up to 8 times the patience. A connection that never came up (a cut link, a blackhole)
  // says nothing of the sort, and the patience stays as it is.
  silence_factor_ = connected_since_join_ ? std::min(8.0, 2.0 * silence_factor_) : 1.0;
  connected_since_join_ = false;
}

void Session::connectionUp(double now, uint64_t instance) {
  connected_since_join_ = true;
  if (standing_ == Standing::refused && retry_join_at_) {
    // Within a second, spread by this process's instance so that a fleet refused together does
    // not ask (each for a whole model's welcome) at once.
    retry_join_at_ = std::min(*retry_join_at_, now + double(instance % 1000) / 1000.0);
  }
}

double Session::nextWakeup() const {
  if (standing_ == Standing::refused && retry_join_at_ && !unfit_welcome_.empty())
    return *retry_join_at_;
  double t = last_heard_ + silenceAllowed();
  if (joined()) t = std::min(t, last_sent_ + heartbeat_);
  if (!joined() && retry_join_at_) t = std::min(t, *retry_join_at_);
  return t;
}

void Session::fitTimersTo(double coordinator_heartbeat, double coordinator_patience) {
  // Each side's settings pass their own ranges, but only together do they work: a worker that
  // heartbeats less often than the coordinator's patience is marked gone between pushes, and one
  // whose patience is shorter than the coordinator's heartbeat re-joins (a whole model's welcome)
  // whenever a round is quiet. Values not said, or not finite and positive, change nothing.
  heartbeat_ = heartbeat_seconds_;
  patience_ = patience_seconds_;
  auto said = [](double v) { return std::isfinite(v) && v > 0.0; };
  if (said(coordinator_patience) && heartbeat_ > coordinator_patience / 3.0) {
    // Not more often than every 10 ms, unless the settings ask for that.
    heartbeat_ = std::max(coordinator_patience / 3.0, std::min(heartbeat_, 0.01));
    spdlog::warn(
        "heartbeat_seconds {:g} is more than a third of the coordinator's worker patience of "
        "{:g} s: heartbeating every {:g} s",
        heartbeat_seconds_, coordinator_patience, heartbeat_);
  }
  if (said(coordinator_heartbeat) && patience_ < 3.0 * coordinator_heartbeat) {
    patience_ = 3.0 * coordinator_heartbeat;
    spdlog::warn(
        "coordinator_patience_seconds {:g} is less than three of the coordinator's heartbeats "
        "of {:g} s: waiting {:g} s",
        patience_seconds_, coordinator_heartbeat, patience_);
  }
}

}  // namespace tern::worker
