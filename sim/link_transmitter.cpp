#include "sim/link_transmitter.hpp"

#include <algorithm>

namespace tern::sim {

LinkTransmitter::LinkTransmitter(double rate_mbps, double burst_bytes)
    : rate_bps_(rate_mbps * 1e6), burst_(burst_bytes), tokens_(burst_bytes) {}

double LinkTransmitter::send(double now, size_t bytes) {
  const double start = std::max(now, free_at_);
  double done = start + double(bytes) * 8.0 / rate_bps_;
  if (burst_ > 0.0) {
    // The bucket refills at the rate while the link idles, up to the burst.
    const double tokens = std::min(burst_, tokens_ + (start - last_) * rate_bps_ / 8.0);
    const double owed = double(bytes) - tokens;  // bytes the bucket cannot pay for at once
    done = owed <= 0.0 ? start : start + owed * 8.0 / rate_bps_;
    tokens_ = owed <= 0.0 ? -owed : 0.0;
  }
  last_ = done;
  free_at_ = done;
  return done;
}

}  // namespace tern::sim
