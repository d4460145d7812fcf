#include "server/join_limiter.hpp"

#include <algorithm>

namespace tern::server {

double JoinLimiter::level(const Bucket& b, double now) const {
  return std::min(rate_.burst, b.tokens + std::max(0.0, now - b.at) * rate_.per_second);
}

bool JoinLimiter::take(const std::string& key, double now) {
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxBuckets) prune(now);
    it = buckets_.emplace(key, Bucket{rate_.burst, now}).first;
  }
  Bucket& b = it->second;
  b.tokens = level(b, now);
  b.at = now;
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

void JoinLimiter::prune(double now) {
  std::erase_if(buckets_, [&](const auto& e) { return level(e.second, now) >= rate_.burst; });
  // Still full: the oldest bucket goes (a key seen again starts with a full bucket).
  while (buckets_.size() >= kMaxBuckets) {
    auto oldest =
        std::min_element(buckets_.begin(), buckets_.end(),
                         [](const auto& a, const auto& b) { return a.second.at < b.second.at; });
    buckets_.erase(oldest);
  }
}

}  // namespace tern::server
