// The log throttle and the reconnect backoff: pure arithmetic on the times given.
#include "common/daemon/throttle.hpp"

#include <doctest/doctest.h>

#include "common/daemon/reconnect_backoff.hpp"

using tern::daemon::ReconnectBackoff;
using tern::daemon::Throttle;

TEST_CASE("a throttle allows the first report, then one per interval") {
  Throttle t(10.0);
  CHECK(t.allow(100.0));
  CHECK_FALSE(t.allow(105.0));
  CHECK_FALSE(t.allow(110.0));
  CHECK(t.allow(110.5));
  CHECK_FALSE(t.allow(115.0));
}

TEST_CASE("a throttle on a count reports only a count that changed since the last report") {
  Throttle t(10.0);
  CHECK_FALSE(t.changed(0, 1.0));  // nothing yet
  CHECK(t.changed(3, 2.0));
  CHECK_FALSE(t.changed(5, 3.0));   // within the interval: held back
  CHECK(t.changed(5, 12.5));        // the count held back is reported once the interval is over
  CHECK_FALSE(t.changed(5, 30.0));  // unchanged since
  CHECK(t.changed(6, 31.0));
}

TEST_CASE("reconnect retries back off from 1 s to 8 s and reset on a handshake that succeeds") {
  ReconnectBackoff b;
  CHECK_FALSE(b.retryAt());
  CHECK_FALSE(b.due(0.0));
  double now = 0.0;
  for (double delay : {1.0, 2.0, 4.0, 8.0, 8.0}) {
    CAPTURE(delay);
    b.failed(now);
    REQUIRE(b.retryAt());
    CHECK(*b.retryAt() == doctest::Approx(now + delay));
    CHECK_FALSE(b.due(now + delay - 0.01));
    CHECK(b.due(now + delay));
    CHECK_FALSE(b.due(now + delay));  // once
    now += delay;
  }
  b.failed(now);
  b.succeeded();
  CHECK_FALSE(b.retryAt());
  CHECK_FALSE(b.due(now + 100.0));
  b.failed(now);
  CHECK(*b.retryAt() == doctest::Approx(now + 1.0));
}
