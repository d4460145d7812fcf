// A signal that lands while a channel sends or receives (SIGTERM, SIGHUP, a watchdog timer) is
// retried or waited out, never thrown: libzmq reports it as EINTR from inside a send or receive.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/time.h>

#include <string>
#include <vector>

#include "common/transport/channel.hpp"

using namespace tern;

namespace {

volatile sig_atomic_t g_alarms = 0;
void onAlarm(int) { g_alarms = g_alarms + 1; }

// A timer that interrupts system calls (no SA_RESTART) every 20 us while it lives.
struct InterruptingTimer {
  struct sigaction before {};
  InterruptingTimer() {
    struct sigaction sa {};
    sa.sa_handler = onAlarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &before);
    itimerval t{{0, 20}, {0, 20}};
    setitimer(ITIMER_REAL, &t, nullptr);
  }
  ~InterruptingTimer() {
    itimerval off{};
    setitimer(ITIMER_REAL, &off, nullptr);
    sigaction(SIGALRM, &before, nullptr);
  }
};

}  // namespace

TEST_CASE("a channel's sends and receives go on through a storm of signals") {
  zmq::context_t ctx;
  transport::ChannelOptions o;
  transport::Channel router(ctx, zmq::socket_type::router, o);
  const auto at = router.bind("tcp://127.0.0.1:0");
  transport::Channel dealer(ctx, zmq::socket_type::dealer, o);
  dealer.socket().set(zmq::sockopt::routing_id, "w");
  dealer.connect(at);
  const std::vector<uint8_t> payload(64 << 10, 3);
  InterruptingTimer timer;
  int sent = 0, received = 0, echoed = 0;
  for (int i = 0; i < 2000; ++i) {
    REQUIRE_NOTHROW(sent += bool(dealer.send("", "push", payload)));
    for (int spin = 0; spin < 200; ++spin) {
      std::optional<transport::Frames> f;
      REQUIRE_NOTHROW(f = router.receive());
      if (f) {
        ++received;
        REQUIRE_NOTHROW(echoed += bool(router.send(f->peer, "update", payload)));
        break;
      }
      REQUIRE_NOTHROW(router.waitReadable(std::chrono::milliseconds(5)));
    }
    for (int spin = 0; spin < 200; ++spin) {
      std::optional<transport::Frames> f;
      REQUIRE_NOTHROW(f = dealer.receive());
      if (f) break;
      REQUIRE_NOTHROW(dealer.waitReadable(std::chrono::milliseconds(5)));
    }
  }
  CHECK(g_alarms > 100);
  CHECK(sent == 2000);
  CHECK(received == 2000);
  CHECK(echoed == 2000);
}
