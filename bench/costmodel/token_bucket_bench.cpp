// The link estimator on token-bucket links, which are not affine in the packet count: a message
// takes latency + b * max(0, packets - tokens), where the tokens (in packets) refill at one per b
// seconds while the link is idle, up to the bucket's size, and a message empties them. A worker
// idles 1 or 10 ms a round (compute), sends the probe the estimator asks for just before its push
// (45 packets), and the link's rate changes after 30 rounds. Counts the seeds whose fitted b is
// more than 15% off the true per-packet time before the change and 20 rounds after it, for the
// estimator and, side by side on the same samples, for a baseline: exponentially weighted least
// squares with the estimator's forgetting and nothing else (no stall gate, no change detection,
// no bounds). Prints a table; asserts nothing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "common/costmodel/link_estimator.hpp"
#include "common/util/rng.hpp"

namespace {

using tern::costmodel::LinkEstimator;

constexpr double kPacket = 1448.0;
constexpr int kSeeds = 30;
constexpr double kTolerance = 0.15;

struct Outcome {
  int off_before = 0;  // seeds with b off before the change
  int off_after = 0;   // seeds on track before the change and off 20 rounds after it
};

// The baseline: t = a + b x (x in packets) by least squares with weights forgetting^age.
class PlainFit {
 public:
  explicit PlainFit(double forgetting) : forgetting_(forgetting) {}
  void add(double x, double y) {
    w_ = forgetting_ * w_ + 1.0;
    sx_ = forgetting_ * sx_ + x;
    sy_ = forgetting_ * sy_ + y;
    sxx_ = forgetting_ * sxx_ + x * x;
    sxy_ = forgetting_ * sxy_ + x * y;
  }
  double slope() const {
    const double det = w_ * sxx_ - sx_ * sx_;
    return det > 0.0 ? (w_ * sxy_ - sx_ * sy_) / det : 0.0;
  }

 private:
  double forgetting_;
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

struct Outcomes {
  Outcome estimator, baseline;
};

Outcomes run(double bucket_packets, double idle_seconds, double rate_before, double rate_after) {
  Outcomes out;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    tern::Rng rng(static_cast<uint64_t>(seed));
    std::normal_distribution<double> jitter(0.0, 0.03);
    const double latency = 0.0003;
    double b = kPacket * 8.0 / rate_before;
    double tokens = bucket_packets;
    double now = 0.0;
    LinkEstimator est;
    PlainFit plain(est.spec().forgetting);
    auto send = [&](size_t bytes) {
      const double packets = std::ceil(static_cast<double>(bytes) / kPacket);
      const double t = (latency + b * std::max(0.0, packets - tokens)) * (1.0 + jitter(rng));
      tokens = 0.0;
      now += t;
      est.addSample(bytes, t);
      plain.add(packets, t);
    };
    auto idle = [&](double seconds) {
      now += seconds;
      tokens = std::min(bucket_packets, tokens + seconds / b);
    };
    auto round = [&] {
      idle(idle_seconds);
      if (auto probe = est.probeToSend(now)) send(*probe);
      send(static_cast<size_t>(45 * kPacket));
    };
    idle(1.0);
    for (size_t bytes : est.calibrationPlan()) send(bytes);
    for (int i = 0; i < 30; ++i) round();
    const auto off = [&](double fitted) { return std::abs(fitted / b - 1.0) > kTolerance; };
    const bool est_on_track = !off(est.fit().b);
    const bool plain_on_track = !off(plain.slope());
    out.estimator.off_before += !est_on_track;
    out.baseline.off_before += !plain_on_track;
    b = kPacket * 8.0 / rate_after;
    for (int i = 0; i < 20; ++i) round();
    out.estimator.off_after += est_on_track && off(est.fit().b);
    out.baseline.off_after += plain_on_track && off(plain.slope());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::printf(
        "usage: %s\nThe link estimator on simulated token-bucket links (takes no options).\n",
        argv[0]);
    return std::string(argv[1]) == "--help" ? 0 : 2;
  }
  std::printf("link estimator on token-bucket links: seeds (of %d) with b off by more than 15%%\n",
              kSeeds);
  std::printf("%-16s %-8s %-18s %-12s %-12s %-12s %-12s\n", "", "", "", "estimator", "", "baseline",
              "");
  std::printf("%-16s %-8s %-18s %-12s %-12s %-12s %-12s\n", "bucket, packets", "idle",
              "rate change", "off before", "off after", "off before", "off after");
  for (double bucket : {1.0, 2.0, 4.0, 8.0, 16.0, 44.0}) {
    for (double idle : {0.001, 0.010}) {
      for (const auto& [before, after] : {std::pair{2e6, 8e6}, std::pair{8e6, 2e6}}) {
        const Outcomes o = run(bucket, idle, before, after);
        char change[32];
        std::snprintf(change, sizeof change, "%.0f -> %.0f Mbit/s", before / 1e6, after / 1e6);
        std::printf("%-16.0f %-5.0f ms %-18s %-12d %-12d %-12d %-12d\n", bucket, idle * 1e3, change,
                    o.estimator.off_before, o.estimator.off_after, o.baseline.off_before,
                    o.baseline.off_after);
      }
    }
  }
  return 0;
}
