// The daemons' event loop over inproc sockets: the message budget per turn, the exits of a phase
// (done, deadline, stop), watched sockets, SIGHUP, and background jobs whose results come back on
// the loop's thread. Waits are bounded by phases' deadlines; no test sleeps.
#include "common/daemon/poll_loop.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <thread>

#include "common/util/steady_clock.hpp"

using namespace tern;
using daemon::Exit;
using daemon::Incoming;
using daemon::Phase;
using daemon::PollLoop;

namespace {

// A ROUTER (the loop's channel) and a DEALER connected to it over inproc.
struct Pair {
  zmq::context_t ctx{1};
  transport::Channel router{ctx, zmq::socket_type::router, {}};
  transport::Channel dealer{ctx, zmq::socket_type::dealer, {}};
  std::atomic<bool> stop{false};
  std::atomic<bool> reload{false};
  explicit Pair(const std::string& name) {
    router.bind("inproc://" + name);
    dealer.connect("inproc://" + name);
  }
  void send(uint32_t worker_id) {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.mutable_heartbeat()->set_worker_id(worker_id);
    REQUIRE(transport::sendMessage(dealer, "", m));
  }
  PollLoop::Options options() {
    PollLoop::Options o;
    o.clock = steadySeconds;
    o.stop = &stop;
    o.reload = &reload;
    return o;
  }
};

// A second socket pair beside the loop's channel, with one event queued on `in`.
struct SideEvent {
  zmq::socket_t in;
  zmq::socket_t out;
  SideEvent(Pair& pair, const std::string& name)
      : in(pair.ctx, zmq::socket_type::pair), out(pair.ctx, zmq::socket_type::pair) {
    in.bind("inproc://" + name);
    out.connect("inproc://" + name);
    out.send(zmq::str_buffer("event"), zmq::send_flags::none);
  }
};

// A phase that gives up after `seconds`: a test that fails does not hang.
Phase bounded(double seconds) {
  Phase p;
  p.deadline = steadySeconds() + seconds;
  return p;
}

}  // namespace

TEST_CASE("a turn takes at most max_messages_per_turn messages, then runs the timers and ticks") {
  Pair pair("budget");
  for (uint32_t i = 0; i < 7; ++i) pair.send(i);
  auto options = pair.options();
  options.max_messages_per_turn = 3;
  int ticks = 0;
  options.tick = [&] { ++ticks; };
  PollLoop loop(pair.router, options);
  std::vector<uint32_t> ids;
  std::vector<size_t> taken_at_turn;
  Phase phase = bounded(5.0);
  phase.done = [&] { return ids.size() == 7; };
  phase.on_message = [&](Incoming& in) {
    CHECK_FALSE(in.peer.empty());
    CHECK(in.bytes > 0);
    ids.push_back(in.message.envelope.heartbeat().worker_id());
  };
  phase.on_turn = [&] { taken_at_turn.push_back(ids.size()); };
  CHECK(loop.run(phase) == Exit::done);
  CHECK(ids == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(taken_at_turn == std::vector<size_t>{3, 6, 7});
  CHECK(ticks == 3);
}

TEST_CASE("a turn stops taking messages as soon as the phase is done, leaving the rest queued") {
  Pair pair("done-early");
  for (uint32_t i = 0; i < 4; ++i) pair.send(i);
  PollLoop loop(pair.router, pair.options());
  int taken = 0;
  Phase first = bounded(5.0);
  first.done = [&] { return taken == 2; };
  first.on_message = [&](Incoming&) { ++taken; };
  CHECK(loop.run(first) == Exit::done);
  CHECK(taken == 2);
  Phase rest = bounded(5.0);
  rest.done = [&] { return taken == 4; };
  rest.on_message = first.on_message;
  CHECK(loop.run(rest) == Exit::done);
}

TEST_CASE(
    "a message that is not an envelope goes to on_malformed with its reason, not on_message") {
  Pair pair("malformed");
  zmq::message_t junk(std::string("not a protobuf envelope, surely"));
  pair.dealer.socket().send(junk, zmq::send_flags::none);
  pair.send(9);
  auto options = pair.options();
  std::string reason;
  options.on_malformed = [&](const std::string& peer, const transport::Parsed& p) {
    CHECK_FALSE(peer.empty());
    reason = p.reason;
  };
  PollLoop loop(pair.router, options);
  std::vector<uint32_t> ids;
  Phase phase = bounded(5.0);
  phase.done = [&] { return !ids.empty(); };
  phase.on_message = [&](Incoming& in) {
    ids.push_back(in.message.envelope.heartbeat().worker_id());
  };
  CHECK(loop.run(phase) == Exit::done);
  CHECK(reason == "envelope_unparseable");
  CHECK(ids == std::vector<uint32_t>{9});
}

TEST_CASE("a phase ends at its deadline, waking for it rather than at max_wait_seconds") {
  Pair pair("deadline");
  PollLoop loop(pair.router, pair.options());
  const double start = steadySeconds();
  Phase phase;
  phase.deadline = start + 0.03;
  phase.max_wait_seconds = 5.0;
  phase.on_message = [](Incoming&) { FAIL("no message was sent"); };
  CHECK(loop.run(phase) == Exit::deadline);
  const double took = steadySeconds() - start;
  CHECK(took >= 0.03);
  CHECK(took < 1.0);
}

TEST_CASE("next_wakeup shortens the wait: the owner's timer runs when it is due") {
  Pair pair("timer");
  PollLoop loop(pair.router, pair.options());
  const double due = steadySeconds() + 0.02;
  double ran_at = 0.0;
  Phase phase = bounded(5.0);
  phase.max_wait_seconds = 5.0;
  phase.next_wakeup = [&] { return due; };
  phase.on_turn = [&] {
    if (steadySeconds() >= due) ran_at = steadySeconds();
  };
  phase.done = [&] { return ran_at > 0.0; };
  CHECK(loop.run(phase) == Exit::done);
  CHECK(ran_at - due < 0.5);
}

TEST_CASE(
    "a stop request ends a phase that ends on stop before any message, a grace phase goes on") {
  Pair pair("stop");
  pair.send(1);
  pair.stop = true;
  PollLoop loop(pair.router, pair.options());
  int taken = 0;
  Phase training = bounded(5.0);
  training.on_message = [&](Incoming&) { ++taken; };
  CHECK(loop.run(training) == Exit::stopped);
  CHECK(taken == 0);
  Phase grace = training;
  grace.ends_on_stop = false;
  grace.done = [&] { return taken == 1; };
  CHECK(loop.run(grace) == Exit::done);
}

TEST_CASE("watched sockets wake the wait and are served every turn, a SIGHUP is served once") {
  Pair pair("watch");
  SideEvent side(pair, "watch-side");
  auto& side_in = side.in;
  pair.reload = true;
  auto options = pair.options();
  int reloads = 0;
  options.on_reload = [&] { ++reloads; };
  PollLoop loop(pair.router, options);
  int served = 0;
  int events = 0;
  Phase phase = bounded(5.0);
  phase.max_wait_seconds = 5.0;
  phase.watches = {{&side_in, [&] {
                      ++served;
                      zmq::message_t m;
                      while (side_in.recv(m, zmq::recv_flags::dontwait)) ++events;
                    }}};
  phase.done = [&] { return events == 1; };
  const double start = steadySeconds();
  CHECK(loop.run(phase) == Exit::done);
  CHECK(steadySeconds() - start < 1.0);
  CHECK(served == 1);
  CHECK(reloads == 1);
  CHECK_FALSE(pair.reload.load());
}

TEST_CASE("a job's result comes back on the loop's thread, and its end wakes the wait") {
  Pair pair("job");
  PollLoop loop(pair.router, pair.options());
  std::optional<int> result;
  std::thread::id worked_on, delivered_on;
  loop.startJob(
      [&](std::stop_token) {
        worked_on = std::this_thread::get_id();
        return 42;
      },
      [&](int r) {
        delivered_on = std::this_thread::get_id();
        result = r;
      });
  CHECK(loop.jobRunning());
  CHECK_THROWS_AS(loop.startJob([](std::stop_token) { return 0; }, [](int) {}), std::logic_error);
  Phase phase = bounded(5.0);
  phase.max_wait_seconds = 5.0;
  phase.done = [&] { return result.has_value(); };
  const double start = steadySeconds();
  CHECK(loop.run(phase) == Exit::done);
  CHECK(steadySeconds() - start < 1.0);
  CHECK(*result == 42);
  CHECK(delivered_on == std::this_thread::get_id());
  CHECK(worked_on != delivered_on);
  CHECK_FALSE(loop.jobRunning());
}

TEST_CASE("a stop request reaches a running job through its stop token, its result still comes") {
  Pair pair("job-stop");
  PollLoop loop(pair.router, pair.options());
  std::optional<bool> stopped;
  loop.startJob(
      [](std::stop_token stop) {
        const double give_up = steadySeconds() + 5.0;
        while (!stop.stop_requested() && steadySeconds() < give_up) std::this_thread::yield();
        return stop.stop_requested();
      },
      [&](bool s) { stopped = s; });
  pair.stop = true;
  Phase grace = bounded(5.0);
  grace.ends_on_stop = false;
  grace.done = [&] { return stopped.has_value(); };
  CHECK(loop.run(grace) == Exit::done);
  CHECK(*stopped);
}

TEST_CASE("an exception thrown by a job is thrown from run, on the loop's thread") {
  Pair pair("job-throws");
  PollLoop loop(pair.router, pair.options());
  bool delivered = false;
  loop.startJob([](std::stop_token) -> int { throw std::runtime_error("bad shard"); },
                [&](int) { delivered = true; });
  Phase phase = bounded(5.0);
  CHECK_THROWS_WITH_AS(loop.run(phase), "bad shard", std::runtime_error);
  CHECK_FALSE(delivered);
  CHECK_FALSE(loop.jobRunning());
  // A void job, and a second one once the first is collected.
  bool ran = false;
  loop.startJob([](std::stop_token) {}, [&] { ran = true; });
  Phase next = bounded(5.0);
  next.done = [&] { return ran; };
  CHECK(loop.run(next) == Exit::done);
}

TEST_CASE("timers keep running while a job computes: heartbeats are not held back by a gradient") {
  Pair pair("job-timers");
  PollLoop loop(pair.router, pair.options());
  std::atomic<bool> release{false};
  std::optional<int> result;
  loop.startJob(
      [&](std::stop_token) {
        const double give_up = steadySeconds() + 5.0;
        while (!release.load() && steadySeconds() < give_up) std::this_thread::yield();
        return 7;
      },
      [&](int r) { result = r; });
  int beats = 0;
  double next_beat = steadySeconds();
  Phase phase = bounded(5.0);
  phase.max_wait_seconds = 5.0;
  phase.next_wakeup = [&] { return next_beat; };
  phase.on_turn = [&] {
    if (steadySeconds() < next_beat) return;
    next_beat = steadySeconds() + 0.005;
    if (++beats == 3) release = true;  // the job ends only after three timer turns
  };
  phase.done = [&] { return result.has_value(); };
  CHECK(loop.run(phase) == Exit::done);
  CHECK(beats >= 3);
  CHECK(*result == 7);
}

TEST_CASE("a watch whose when() is false is neither polled nor served, and wakes the loop after") {
  Pair pair("watch-when");
  SideEvent side(pair, "watch-when-side");
  auto& side_in = side.in;
  PollLoop loop(pair.router, pair.options());
  bool open = false;
  int served_closed = 0;
  int events = 0;
  int turns = 0;
  Phase phase = bounded(5.0);
  phase.max_wait_seconds = 0.01;
  phase.watches = {{&side_in,
                    [&] {
                      if (!open) ++served_closed;
                      zmq::message_t m;
                      while (side_in.recv(m, zmq::recv_flags::dontwait)) ++events;
                    },
                    [&] { return open; }}};
  phase.on_turn = [&] { open = ++turns >= 3; };
  phase.done = [&] { return events == 1; };
  CHECK(loop.run(phase) == Exit::done);
  CHECK(served_closed == 0);
  CHECK(turns == 4);  // closed through the third turn (the event waited), served in the fourth
}
