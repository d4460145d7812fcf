#pragma once
// Join rate limits: a token bucket per connection (ROUTER identity) or per CURVE key, so that one
// peer cannot churn the membership table with joins under made-up names. Each key may join
// `burst` times at once, then once per 1 / per_second seconds (docs/security.md).
#include <cstddef>
#include <map>
#include <string>

namespace tern::server {

struct JoinRate {
  double per_second = 1.0;  // tokens refilled per second (> 0)
  double burst = 10.0;      // the bucket's size (>= 1)
};

class JoinLimiter {
 public:
  // Buckets kept at most; past it, the full ones (nothing to remember) are dropped.
  static constexpr size_t kMaxBuckets = 4096;

  explicit JoinLimiter(JoinRate rate) : rate_(rate) {}
  // Takes one join for `key` at `now`; false when its bucket is empty (the join is refused).
  bool take(const std::string& key, double now);
  size_t buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens = 0.0;
    double at = 0.0;  // when `tokens` was counted
  };
  double level(const Bucket& b, double now) const;
  void prune(double now);
  JoinRate rate_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace tern::server
