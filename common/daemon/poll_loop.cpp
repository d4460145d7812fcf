#include "common/daemon/poll_loop.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <thread>

namespace tern::daemon {

PollLoop::PollLoop(transport::Channel& channel, Options options)
    : channel_(channel), options_(std::move(options)) {}

Exit PollLoop::run(const Phase& phase) {
  for (;;) {
    if (auto why = exitOf(phase)) return *why;
    turn(phase);
  }
}

std::optional<Exit> PollLoop::exitOf(const Phase& phase) const {
  if (phase.ends_on_stop && stopping()) return Exit::stopped;
  if (phase.done && phase.done()) return Exit::done;
  if (phase.deadline && options_.clock() >= *phase.deadline) return Exit::deadline;
  return std::nullopt;
}

void PollLoop::turn(const Phase& phase) {
  const bool readable = wait(phase);
  // A stop ends the computation between its chunks: the Leave must not wait for a whole gradient.
  if (stopping()) job_.requestStop();
  for (const auto& w : phase.watches) {
    if (w.serve && w.active()) w.serve();
  }
  if (options_.on_reload && options_.reload && options_.reload->exchange(false)) {
    options_.on_reload();
  }
  if (auto deliver = job_.collect()) deliver();
  if (readable) takeMessages(phase);
  if (phase.on_turn) phase.on_turn();
  if (options_.tick) options_.tick();
}

// Waits until the next timer (bounded by max_wait_seconds and the deadline) for the channel, a
// watched socket or the job; returns whether the channel is readable.
bool PollLoop::wait(const Phase& phase) {
  const double now = options_.clock();
  double until = now + phase.max_wait_seconds;
  if (phase.next_wakeup) until = std::min(until, phase.next_wakeup());
  if (phase.deadline) until = std::min(until, *phase.deadline);
  const double seconds = std::clamp(until - now, 0.0, phase.max_wait_seconds);
  // Rounded up: a timer due in half a millisecond is waited for, not polled for in a spin.
  const auto timeout = std::chrono::milliseconds(long(std::ceil(seconds * 1000.0)));

  std::vector<zmq::pollitem_t> items;
  const bool take = bool(phase.on_message) && !(phase.ends_on_stop && stopping());
  if (take) items.push_back({channel_.socket().handle(), 0, ZMQ_POLLIN, 0});
  for (const auto& w : phase.watches) {
    if (w.active()) items.push_back({w.socket->handle(), 0, ZMQ_POLLIN, 0});
  }
  if (job_.busy()) items.push_back({nullptr, job_.fd(), ZMQ_POLLIN, 0});
  if (items.empty()) {
    std::this_thread::sleep_for(timeout);
    return false;
  }
  try {
    zmq::poll(items.data(), items.size(), timeout);
  } catch (const zmq::error_t& e) {
    // A signal (SIGTERM, SIGHUP) interrupted the wait: the turn goes on and reads the flags.
    if (e.num() != EINTR) throw;
    return false;
  }
  return take && (items.front().revents & ZMQ_POLLIN) != 0;
}

void PollLoop::takeMessages(const Phase& phase) {
  for (size_t taken = 0; taken < options_.max_messages_per_turn; ++taken) {
    if (phase.ends_on_stop && stopping()) return;
    auto frames = channel_.receive();
    if (!frames) return;
    const double at = options_.clock();
    auto parsed = transport::parseFrames(*frames);
    if (!parsed.message) {
      if (options_.on_malformed) options_.on_malformed(frames->peer, parsed);
      continue;
    }
    Incoming in{std::move(frames->peer), std::move(*parsed.message), frames->bytes, at,
                std::move(frames->user_id)};
    phase.on_message(in);
    if (phase.done && phase.done()) return;
  }
}

}  // namespace tern::daemon
