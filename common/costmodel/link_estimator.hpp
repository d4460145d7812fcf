#pragma once
// Online estimate of one worker's link, the measured affine packet model of docs/cat.md
// (method, cost models): t(bytes) = a + b * ceil(bytes / P_max), fitted from the worker's own
// pushes by exponentially weighted recursive least squares that survives stalled acks and follows
// real rate changes; plus the probe policy (join-time calibration, exploration when pushes are too
// alike in size to tell a from b) under a bytes-per-minute cap. Sans-I/O: callers pass measured
// seconds and clock readings in; nothing here reads a clock.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace tern::costmodel {

// The largest join-time calibration probe, in packets (about 6 MB at 1448 bytes a packet), and
// the most calibration sizes: a probe is built in memory and paid for on the link.
inline constexpr size_t kMaxCalibrationPackets = 4096;
inline constexpr size_t kMaxCalibrationSizes = 64;

struct LinkEstimatorSpec {
  uint32_t packet_bytes = 1448;  // TCP payload per 1500-byte MTU with timestamps
  double forgetting = 0.97;      // exponential weighting of old samples (RLS lambda), in (0, 1]
  double outlier_sigma = 4.0;    // residual threshold for robust handling
  std::vector<size_t> calibration_packets = {1, 4, 16, 64};
  uint32_t probe_repeats = 2;       // each calibration size sent this many times
  double identifiability_cv = 0.2;  // below this spread of recent packet counts, ask for a probe
  size_t probe_bytes_per_minute = 256 * 1024;
  // And at most this share of what the link carries in a minute at the fitted b
  // (60 s / b packets): on a 50 kbit/s link 256 KiB a minute would be 70% of the link.
  double probe_link_share = 0.1;
  // Outliers on the same side, not refuted by a typical sample in between, that must agree on
  // one new line before the estimator believes the link changed rather than stalled: a step
  // change is followed after about this many samples.
  uint32_t shift_confirm_samples = 4;
  // Recent pushes looked at to decide whether their sizes still identify b (at least
  // kMinExplorationWindow).
  uint32_t exploration_window = 32;
  // No link moves a packet faster than this. A fitted b never goes below packet_bytes * 8 / this
  // (0.116 us for 1448 bytes at 100 Gbit/s): on a link so fast that its per-packet time drowns
  // in jitter (loopback), the constrained optimum would be b = 0, which readers of the model
  // (the allocator) take for "not measured yet".
  double max_bits_per_second = 100e9;
};

// The smallest exploration_window, and the recent pushes needed before a probe is asked for.
inline constexpr size_t kMinExplorationWindow = 8;

struct LinkFit {
  double a = 0, b = 0;                // seconds, seconds per packet
  double a_stderr = 0, b_stderr = 0;  // standard errors of a and b
  double r2 = 0;                      // weighted coefficient of determination
  uint64_t samples = 0;  // samples accepted into the fit (before the first fit: samples held)
  uint32_t packet_bytes = 1448;
  bool valid = false;  // false while b is not identified by the samples held (see fit())
};

// How samples are used:
// - Weights forgetting^age / prediction^2: timing jitter grows with the transfer, so the fit
//   minimises relative error. a, b solve the weighted normal equations (kept as centred sums, the
//   information form of RLS); stderrs use the sandwich covariance with the residual variance.
// - Gate: a sample whose relative innovation exceeds outlier_sigma times the online jitter scale
//   (mean absolute residual of accepted samples, widened by the fit's own prediction error) is
//   set aside as a stall and never touches the fit.
// - Change: shift_confirm_samples outliers on one side, unrefuted, each agreeing with the robust
//   line through the others, restart the fit from them: a sustained shift is followed within a
//   few samples, while random stalls (which agree with nothing) are not mistaken for one.
// - Start: the first 8 samples of spread sizes are fitted robustly (weighted Theil-Sen) and
//   their outliers dropped before the recursive fit takes over.
// - Unknown b (sizes held too alike): a sample far from them would set b alone, so it waits
//   until a second one agrees with it, and probes are asked for every other sample.
class LinkEstimator {
 public:
  // Throws std::invalid_argument on a spec that cannot work (zero packet size, forgetting
  // outside (0, 1], non-positive outlier threshold, a zero calibration size).
  explicit LinkEstimator(const LinkEstimatorSpec& spec = {});

  // One observation: `bytes` on the wire took `seconds` (ack rx - push tx - coordinator hold).
  // Non-finite or negative times are ignored (counted in ignoredSamples()). `probe`: a probe's,
  // which counts in the spread of recent sizes but not in the pushes' size that exploration
  // probes are chosen away from.
  void addSample(size_t bytes, double seconds, bool probe = false);

  // t(bytes) = a + b * ceil(bytes / P_max).
  // - Until a few samples of clearly different sizes arrived, no line can be fitted robustly:
  //   valid = false, a = 0 and b = the median seconds per packet seen so far (a proportional
  //   prior, which never prices a larger payload below a smaller one).
  // - Later, when the samples still held (after forgetting) are too alike in size to identify b,
  //   b keeps its last identified value, a is refitted under it, and valid = false.
  // - b >= b_min = packet_bytes * 8 / max_bits_per_second (a per-packet time is positive, and
  //   b = 0 would read as "unknown") and a + b * x_lo >= 0, x_lo the fewest packets among the
  //   last exploration_window samples (the sizes in use take no negative time; a alone may be
  //   negative: a token bucket passes the first packets after idle free, a ~ -b per packet it
  //   holds): the constrained weighted least-squares optimum, i.e. b = b_min with a refitted
  //   under it when the free slope is below b_min, a = -b * x_lo with the slope through
  //   (x_lo packets, 0 s) when the free line would price x_lo packets below zero. Standard
  //   errors are those of the unconstrained fit. Readers that need a >= 0 (cost models) clamp
  //   it themselves.
  // - r2 is weighted like the fit (relative error); stderrs are infinite while not computable.
  LinkFit fit() const;
  double predict(size_t bytes) const;

  // Probe payload sizes in wire bytes for the join-time train: every calibration size
  // (packets * P_max) probe_repeats times, interleaved so slow drift during the train does not
  // masquerade as slope. The sender subtracts its own framing to occupy exactly that many packets.
  // This one-off train is not charged to the exploration budget; with the defaults it is
  // 2 * 85 packets = 246 KB, within one minute's cap.
  std::vector<size_t> calibrationPlan() const;

  // Exploration: when the recent pushes are too alike in size to identify b, returns a probe
  // size (wire bytes) to send now, if the bytes sent as probes over the last 60 seconds
  // (sliding window ending at now_seconds) plus this probe stay within probe_bytes_per_minute
  // and within probe_link_share of the fitted link's minute.
  // A returned probe is charged to the budget at once. Probes are spaced by at least a quarter
  // of the exploration window in samples, so one slow ack cannot trigger a burst. While b is
  // unknown (fit().valid false after the first fit, e.g. a link change seen at one push size),
  // probes are asked for every other sample whatever the recent sizes, still within the cap.
  // A probe larger than the whole cap is never sent. now_seconds must never decrease.
  // Only sizes from usefulCalibrationPackets() are asked for: none while the largest push fits
  // in one packet.
  std::optional<size_t> probeToSend(double now_seconds);

  // The largest push this worker may send now (its cap's), in wire bytes; 0 = not known. Every
  // push it chooses between costs a + b * (1 .. its packets), so a probe above the calibration
  // size that covers those packets cannot change a choice, and while the largest push fits in
  // one packet every choice costs the same and no probe can (docs/link-model.md).
  void setLargestPush(size_t wire_bytes) { largest_push_bytes_ = wire_bytes; }
  // The calibration sizes (packets, ascending) a probe is worth sending at: those up to the
  // smallest one at least the largest push's packets (all of them while that is not known);
  // empty while the largest push fits in one packet.
  std::vector<size_t> usefulCalibrationPackets() const;

  void reset();

  const LinkEstimatorSpec& spec() const { return spec_; }
  // Samples left out of the fit: stalls, and far samples no second one confirmed.
  uint64_t rejectedSamples() const { return rejected_; }
  uint64_t ignoredSamples() const { return ignored_; }  // unusable input
  uint64_t shiftsDetected() const { return shifts_; }   // accepted link changes

 private:
  struct Sample {
    double x;  // packets
    double y;  // seconds
  };
  // t = a + b * x with x in packets.
  struct Line {
    double a = 0, b = 0;
    double at(double x) const { return a + b * x; }
  };

  double packetsOf(size_t bytes) const;
  double minSlope() const;
  bool slopeIdentified() const;
  Line currentLine(bool* identified) const;
  // Probe bytes the last minute's probes leave of the probe budget (probe_bytes_per_minute, and
  // probe_link_share of the fitted link).
  double probeRoom() const;
  double predictPackets(double x) const;
  double robustScale() const;
  double predictionVariance(double x, double prediction) const;
  void clearSums();
  void addToFit(const Sample& s, double prediction);
  void rememberResidual(double relative_residual);
  void tryBootstrap();
  void handleRejected(const Sample& s, double relative_residual);
  void addFarSample(const Sample& s);
  void noteSize(double x, bool probe);
  // The fewest packets among the recent samples (1 before any): the sizes in use cost no
  // negative time, a + b * x >= 0 there.
  double smallestRecentSize() const;

  LinkEstimatorSpec spec_;

  // Warm-up: raw samples until a robust first line can be drawn through them.
  bool bootstrapped_ = false;
  std::vector<Sample> warmup_;

  // Weighted sufficient statistics (centred, updated Welford-style so nothing cancels).
  // Sample weight w = f * p: f = forgetting^age, p = 1 / prediction^2 (relative-error fit).
  double w_sum_ = 0;  // sum w
  double mean_x_ = 0, mean_y_ = 0;
  double cxx_ = 0, cxy_ = 0, cyy_ = 0;
  // For the sandwich covariance of (a, b): sums with f^2 * p.
  double v_sum_ = 0, v_x_ = 0, v_xx_ = 0;  // sum v, sum v (x - mean_x), sum v (x - mean_x)^2
  // Forgetting-only sums, for the residual degrees of freedom.
  double f_sum_ = 0, f2_sum_ = 0;
  double b_prior_ = 0;  // last identified slope, used while b is not identifiable

  // Scale of the relative jitter, from the a-priori residuals of accepted samples.
  double scale_abs_sum_ = 0, scale_weight_ = 0;
  uint64_t scale_count_ = 0;

  // Samples far from the sizes held while b is unknown, waiting for one that agrees.
  std::vector<Sample> far_;
  // Outliers not yet refuted by a typical sample (candidates for a link change).
  std::vector<std::pair<Sample, double>> pending_;

  // Exploration state.
  std::vector<double> recent_sizes_;  // ring of packet counts
  std::vector<bool> recent_probe_;    // beside it: whether the sample was a probe's
  size_t recent_next_ = 0;
  double recent_sum_ = 0, recent_sum_sq_ = 0;
  double recent_push_sum_ = 0;  // the pushes' packets among the recent sizes
  size_t recent_pushes_ = 0;
  uint64_t samples_since_probe_ = 0;
  std::deque<std::pair<double, size_t>> probes_sent_;  // (time, bytes) within the last minute
  size_t largest_push_bytes_ = 0;                      // see setLargestPush; 0 = not known

  uint64_t accepted_ = 0, rejected_ = 0, ignored_ = 0, shifts_ = 0;
};

}  // namespace tern::costmodel
