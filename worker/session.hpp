#pragma once
// The worker's standing with the coordinator: join, welcome, re-join on silence or refusal, the
// heartbeat and patience timers fitted to the coordinator's, and the Leave's answer. It decides
// when; the core builds and sends the messages (proto/worker_messages.hpp).
#include <cstdint>
#include <optional>
#include <string>

#include "proto/worker_messages.hpp"

namespace tern::worker {

enum class Standing {
  joining,  // a join went out (or is about to); no welcome has answered it
  refused,  // the last join or welcome was refused: asked again at retryAt()
  joined,   // welcomed
};

class Session {
 public:
  // The configured heartbeat interval and patience with the coordinator.
  Session(double heartbeat_seconds, double patience_seconds);

  // A join goes out now: returns its nonce.
  uint64_t joining(double now);
  void welcomed(const proto::WorkerAddress& address, bool acks_leave, double coordinator_heartbeat,
                double coordinator_patience);
  // The join was refused (`why`): ask again at `at`.
  void refusedUntil(double at, const std::string& why);
  // The welcome's model does not fit the shard (`why`): asked again later, longer each time.
  // Returns the wait.
  double unfit(const std::string& why, double now);
  void heard(double now);
  void sent(double now) { last_sent_ = now; }
  void connectionUp(double now, uint64_t instance);
  // A Leave went out to a coordinator that answers Leaves (or does not).
  void leaveSent(bool answered) { leave_unanswered_ = answered; }
  void noteLeaveAnswer(const wire::Envelope& env);

  enum class Due { nothing, retry_join, silent_rejoin, heartbeat };
  // What falls due at `now` (the caller acts on it; silentRejoin() for a silent re-join).
  Due due(double now) const;
  // A re-join on silence: the next silence allowed may be longer (see session.cpp).
  void silentRejoin();
  double nextWakeup() const;

  Standing standing() const { return standing_; }
  bool joined() const { return standing_ == Standing::joined; }
  bool awaitingWelcome() const { return standing_ == Standing::joining && join_sent_.has_value(); }
  uint64_t joinNonce() const { return join_nonce_; }
  std::optional<double> joinSent() const { return join_sent_; }
  double lastHeard() const { return last_heard_; }
  const proto::WorkerAddress& address() const { return address_; }
  bool acksLeave() const { return acks_leave_; }
  bool leaveUnanswered() const { return leave_unanswered_; }
  const std::string& unfitWelcome() const { return unfit_welcome_; }
  // Why the last join or welcome was refused; "" once welcomed.
  const std::string& refusal() const { return refusal_; }
  double silenceAllowed() const { return patience_ * silence_factor_; }
  double heartbeatInterval() const { return heartbeat_; }
  double patience() const { return patience_; }

 private:
  void fitTimersTo(double coordinator_heartbeat, double coordinator_patience);

  double heartbeat_seconds_, patience_seconds_;  // as configured
  Standing standing_ = Standing::joining;
  proto::WorkerAddress address_;
  uint64_t join_nonce_ = 0;  // of the last join sent; a welcome answering another is stale
  std::optional<double> join_sent_;
  std::optional<double> retry_join_at_;
  double last_heard_ = 0.0, last_sent_ = 0.0;
  // The heartbeat interval and the patience in use: the settings', fitted at each welcome.
  double heartbeat_, patience_;
  double silence_factor_ = 1.0;        // silenceAllowed() in units of the patience
  bool connected_since_join_ = false;  // a handshake completed since the last silent re-join
  uint32_t unfit_welcomes_ = 0;        // welcomes in a row whose model does not fit the shard
  std::string unfit_welcome_;          // why the last of them did not
  std::string refusal_;                // why the last join or welcome was refused, until welcomed
  bool acks_leave_ = false;
  bool leave_unanswered_ = false;
};

}  // namespace tern::worker
