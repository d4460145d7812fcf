#pragma once
// One direction of a simulated link: a message's bytes leave at the link's rate after whatever
// the token bucket's burst lets through at once, as Linux's tbf without a peak rate shapes a
// link (the burst at the line's speed). Messages queue behind each other. burst 0: rate only.
#include <cstddef>

namespace tern::sim {

class LinkTransmitter {
 public:
  // rate_mbps > 0; burst_bytes >= 0 (the bucket starts full).
  LinkTransmitter(double rate_mbps, double burst_bytes);
  // The time the last byte of a message of `bytes` handed over at `now` has left the link.
  double send(double now, size_t bytes);

 private:
  double rate_bps_;
  double burst_;
  double tokens_;         // bytes the bucket holds at last_
  double last_ = 0.0;     // when tokens_ was last brought up to date
  double free_at_ = 0.0;  // when the link is done with what was handed over before
};

}  // namespace tern::sim
