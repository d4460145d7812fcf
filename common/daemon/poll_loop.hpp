#pragma once
// The one event loop of both daemons. Each turn it waits on the channel, on the sockets a phase
// watches (the CURVE handshake monitor, the ZAP handler) and on a finished background job, for at
// most the time to the owner's next timer; then it serves the watched sockets, a SIGHUP, the
// job's result, at most max_messages_per_turn messages (so a flood never starves timers or the
// watchdog), the owner's timers, and the telemetry tick. It knows no core: a main hands it
// function objects, grouped in a Phase per stage of the daemon's life (training, a grace period
// after a stop), and runs one phase after the other:
//
//   daemon::PollLoop loop(channel, {.clock = steadySeconds, .tick = [&] { tel.tick(); }});
//   daemon::Phase training{
//       .done = [&] { return core.finished(); },
//       .next_wakeup = [&] { return core.nextWakeup(); },
//       .watches = {{&handshakes.socket(), [&] { serveHandshakes(); }}},
//       .on_message = [&](daemon::Incoming& in) { send(core.onMessage(in.message, in.bytes)); },
//       .on_turn = [&] { send(core.onTick()); }};
//   if (loop.run(training) == daemon::Exit::stopped) { /* a grace phase, with a deadline */ }
//
// A compute request is fulfilled with loop.startJob(work, done): work runs on its own thread,
// done(result) on the loop's thread in the turn after it returns (as one more event).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/daemon/background_job.hpp"
#include "common/daemon/signals.hpp"
#include "common/transport/framing.hpp"

namespace tern::daemon {

// Seconds on the daemon's clock (steadySeconds in the daemons, a fake in tests).
using Clock = std::function<double()>;

// One message taken from the channel and parsed; on_message may move from it.
struct Incoming {
  std::string peer;  // the ROUTER's identity of the sender; empty on a DEALER
  Message message;
  size_t bytes = 0;          // frame bytes, identity excluded
  double received_at = 0.0;  // the clock when it was taken
  std::string user_id;       // the ZAP user id (a CURVE client's Z85 key); empty in plaintext
};

// A socket a phase wakes on besides the channel. `serve` runs every turn of the phase, readable
// or not (it drains without blocking and may keep rate-limited logs); it must not block. With
// `when` set, the socket is polled and served only in turns where when() is true (a socket that
// a job's thread uses meanwhile is left to it).
struct Watch {
  Watch(zmq::socket_t* s, std::function<void()> serve_fn, std::function<bool()> when_fn = {})
      : socket(s), serve(std::move(serve_fn)), when(std::move(when_fn)) {}
  zmq::socket_t* socket = nullptr;
  std::function<void()> serve;
  std::function<bool()> when;
  bool active() const { return !when || when(); }
};

// One stage of a daemon's life: what ends it and what each turn does. Unset hooks do nothing.
struct Phase {
  // The phase's goal: checked before every turn and after every message.
  std::function<bool()> done;
  // Absolute clock seconds at which the phase gives up.
  std::optional<double> deadline;
  // A stop request (SIGTERM/SIGINT) ends the phase, and no message is taken after it.
  bool ends_on_stop = true;
  // When on_turn next wants to run (absolute seconds); the wait never exceeds max_wait_seconds,
  // which also bounds the time between telemetry ticks.
  std::function<double()> next_wakeup;
  double max_wait_seconds = 0.1;
  std::vector<Watch> watches;
  // Unset: messages stay queued (and do not wake the loop).
  std::function<void(Incoming&)> on_message;
  // Timers and publication: every turn, after the messages.
  std::function<void()> on_turn;
};

// Why PollLoop::run returned.
enum class Exit { done, stopped, deadline };

class PollLoop {
 public:
  struct Options {
    Clock clock;
    // Every turn, and at least every max_wait_seconds: /healthz and the systemd watchdog.
    std::function<void()> tick;
    // A SIGHUP (the flag is consumed only when this is set).
    std::function<void()> on_reload;
    // A message that is not a tern envelope: its sender and why (transport::Parsed's reason and
    // error). Unset: dropped silently.
    std::function<void(const std::string& peer, const transport::Parsed&)> on_malformed;
    size_t max_messages_per_turn = transport::kMaxMessagesPerTurn;
    // The flags set by the signal handlers (tests point these at their own).
    const std::atomic<bool>* stop = &stopRequested();
    std::atomic<bool>* reload = &reloadRequested();
  };

  // `channel` must outlive the loop.
  PollLoop(transport::Channel& channel, Options options);
  PollLoop(const PollLoop&) = delete;
  PollLoop& operator=(const PollLoop&) = delete;

  // Turns until the phase is done, its deadline passes, or (if it ends_on_stop) a stop is asked.
  Exit run(const Phase& phase);

  // Runs work(std::stop_token) -> R on a thread of its own; done(R) runs on the loop's thread in
  // the first turn after work returns (of whichever phase is running). The token is requested
  // on a stop signal and by cancelJob(). One job at a time (std::logic_error otherwise).
  template <class Work, class Done>
  void startJob(Work work, Done done);
  // Whether a job was started and its done() has not run yet.
  bool jobRunning() const { return job_.busy(); }
  // Asks the running job to end early; its done() still runs when it returns.
  void cancelJob() { job_.requestStop(); }

  const Clock& clock() const { return options_.clock; }

 private:
  std::optional<Exit> exitOf(const Phase& phase) const;
  bool stopping() const { return options_.stop && options_.stop->load(); }
  void turn(const Phase& phase);
  bool wait(const Phase& phase);
  void takeMessages(const Phase& phase);

  transport::Channel& channel_;
  Options options_;
  BackgroundJob job_;
};

template <class Work, class Done>
void PollLoop::startJob(Work work, Done done) {
  using Result = std::invoke_result_t<Work&, std::stop_token>;
  job_.start([work = std::move(work),
              done = std::move(done)](std::stop_token stop) mutable -> BackgroundJob::Continuation {
    if constexpr (std::is_void_v<Result>) {
      work(stop);
      return [done]() mutable { done(); };
    } else {
      // shared: a std::function must be copyable, a result need not be.
      auto result = std::make_shared<Result>(work(stop));
      return [done, result]() mutable { done(std::move(*result)); };
    }
  });
}

}  // namespace tern::daemon
