// Join rate limits: a token bucket per connection or key, refilled at its rate up to its burst,
// each key on its own, and a bounded number of buckets however many keys are seen.
#include "server/join_limiter.hpp"

#include <doctest/doctest.h>

#include <string>

using tern::server::JoinLimiter;
using tern::server::JoinRate;

TEST_CASE("a key joins burst times at once, then once per 1/rate seconds, apart from others") {
  JoinLimiter limiter(JoinRate{0.5, 3.0});
  for (int i = 0; i < 3; ++i) CHECK(limiter.take("A", 0.0));
  CHECK_FALSE(limiter.take("A", 0.0));
  CHECK_FALSE(limiter.take("A", 1.9));  // 0.95 of a token refilled
  CHECK(limiter.take("A", 2.0));        // one refilled (the refused tries cost nothing)
  CHECK_FALSE(limiter.take("A", 2.0));
  CHECK(limiter.take("B", 2.0));  // another key has its own bucket
  // Refills stop at the burst: after a long pause, again three at once and no more.
  for (int i = 0; i < 3; ++i) CHECK(limiter.take("A", 1000.0));
  CHECK_FALSE(limiter.take("A", 1000.0));
}

TEST_CASE("the buckets stay bounded however many keys join") {
  JoinLimiter limiter(JoinRate{1.0, 2.0});
  for (size_t i = 0; i < 3 * JoinLimiter::kMaxBuckets; ++i) {
    CHECK(limiter.take("peer-" + std::to_string(i), 0.0));  // a new key starts full
  }
  CHECK(limiter.buckets() <= JoinLimiter::kMaxBuckets);
  // A busy key seen last keeps its (drained) bucket.
  const std::string last = "peer-" + std::to_string(3 * JoinLimiter::kMaxBuckets - 1);
  CHECK(limiter.take(last, 0.0));
  CHECK_FALSE(limiter.take(last, 0.0));
}
