#include "common/costmodel/link_estimator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tern::costmodel {
namespace {

// A robust first line needs a few samples (the default join train is 8, and Theil-Sen through 8
// shrugs off 2 stalls); more than kWarmupCapacity unresolved warm-up samples (all one size) are
// not worth keeping, since forgetting would have discounted them anyway.
constexpr size_t kWarmupMin = 8;
constexpr size_t kWarmupCapacity = 32;
// Scale of the relative jitter: an exponentially weighted mean absolute residual of the samples
// that passed the gate (stalls never enter it), over about 100 samples so that the 4-sigma gate
// itself does not wobble. mean |N(0, s)| = s * sqrt(2 / pi).
constexpr double kScaleForgetting = 0.99;
constexpr double kMeanAbsToSigma = 1.2533141373155;
// Until the scale has seen kColdSamples residuals it is not trusted below kColdScale, fading
// linearly: a young fit's jitter estimate is too noisy to reject anything but clear stalls.
constexpr double kColdScale = 0.25;
constexpr double kColdSamples = 32;
// Relative jitter below 1% is never evidence of a stall: without this floor, clean data would
// shrink the scale to zero and every later sample would look like an outlier. Above 25% the
// line explains nothing; the cap keeps a fit spoiled by a bad start from widening its own gate
// until it accepts everything, and makes "twice as slow as predicted" always suspect.
constexpr double kMinRelativeScale = 0.01;
constexpr double kMaxRelativeScale = 0.25;
// Samples of a new regime scatter around their own line with the link's usual jitter; random
// stalls scatter by factors. Agreement is judged at this fraction of the outlier threshold.
constexpr double kShiftAgreement = 0.5;
constexpr size_t kPendingCapacity = 16;
constexpr double kLeaningSigma = 2.0;
constexpr double kMinPrediction = 1e-9;  // seconds; keeps relative residuals finite
constexpr double kWeightFloor = 0.01;    // of the fit's mean time, for 1/prediction^2 weights
constexpr size_t kFarCapacity = 4;
constexpr double kInf = std::numeric_limits<double>::infinity();

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

// The value where the cumulative weight of sorted values reaches half the total.
double weightedMedian(std::vector<std::pair<double, double>> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  double total = 0;
  for (const auto& e : v) total += e.second;
  double running = 0;
  for (const auto& e : v) {
    running += e.second;
    if (running >= 0.5 * total) return e.first;
  }
  return v.back().first;
}

double relativeResidual(double y, double prediction) {
  return (y - prediction) / std::max(prediction, kMinPrediction);
}

// Robust line through a handful of samples (the join train, or the outliers that may announce a
// link change), under the same b >= 0 and a + b * x_lo >= 0 constraints as the running fit (x_lo
// here the fewest packets among these samples). Theil-Sen: the median of pairwise slopes ignores
// stalled samples that would drag an ordinary fit anywhere. Each slope counts by its precision
// (size gap over the pair's time), so pairs of close sizes, and pairs holding a stall, do not
// decide it. Returns (a, b).
template <typename Samples>
std::pair<double, double> theilSenLine(const Samples& pts) {
  std::vector<std::pair<double, double>> slopes;  // (slope, weight)
  for (size_t i = 0; i < pts.size(); ++i) {
    for (size_t j = i + 1; j < pts.size(); ++j) {
      const auto& p = pts[i];
      const auto& q = pts[j];
      if (q.x == p.x) continue;
      const double weight = std::abs(q.x - p.x) / std::max(std::hypot(p.y, q.y), kMinPrediction);
      slopes.emplace_back((q.y - p.y) / (q.x - p.x), weight);
    }
  }
  double b = std::max(0.0, weightedMedian(std::move(slopes)));
  // Intercepts by precision too (1 / time under relative jitter): a stall's counts for little.
  std::vector<std::pair<double, double>> intercepts;
  for (const auto& s : pts)
    intercepts.emplace_back(s.y - b * s.x, 1.0 / std::max(s.y, kMinPrediction));
  double a = weightedMedian(std::move(intercepts));
  double x_lo = kInf;  // the smallest message here costs no negative time
  for (const auto& s : pts) x_lo = std::min(x_lo, s.x);
  x_lo = std::max(1.0, x_lo);
  if (a + b * x_lo < 0) {  // through (x_lo packets, 0 s) instead
    std::vector<double> per_packet;
    for (const auto& s : pts)
      if (s.x > x_lo) per_packet.push_back(s.y / (s.x - x_lo));
    b = per_packet.empty() ? 0.0 : std::max(0.0, median(std::move(per_packet)));
    a = -b * x_lo;
  }
  return {a, b};
}

}  // namespace

LinkEstimator::LinkEstimator(const LinkEstimatorSpec& spec) : spec_(spec) {
  if (spec_.packet_bytes == 0) throw std::invalid_argument("link estimator: packet_bytes is 0");
  if (!(spec_.forgetting > 0.0 && spec_.forgetting <= 1.0))
    throw std::invalid_argument("link estimator: forgetting must be in (0, 1]");
  if (!(spec_.outlier_sigma > 0.0))
    throw std::invalid_argument("link estimator: outlier_sigma must be positive");
  if (spec_.calibration_packets.size() > kMaxCalibrationSizes)
    throw std::invalid_argument("link estimator: more than " +
                                std::to_string(kMaxCalibrationSizes) + " calibration sizes");
  for (size_t packets : spec_.calibration_packets) {
    if (packets == 0 || packets > kMaxCalibrationPackets)
      throw std::invalid_argument("link estimator: calibration size of " + std::to_string(packets) +
                                  " packets, not in [1, " + std::to_string(kMaxCalibrationPackets) +
                                  "]");
  }
  if (spec_.shift_confirm_samples < 2)
    throw std::invalid_argument("link estimator: shift_confirm_samples must be at least 2");
  if (spec_.exploration_window < kMinExplorationWindow)
    throw std::invalid_argument("link estimator: exploration_window must be at least 8");
  if (!(spec_.max_bits_per_second > 0.0))
    throw std::invalid_argument("link estimator: max_bits_per_second must be positive");
  if (!(spec_.probe_link_share > 0.0 && spec_.probe_link_share <= 1.0))
    throw std::invalid_argument("link estimator: probe_link_share must be in (0, 1]");
  reset();
}

void LinkEstimator::reset() {
  bootstrapped_ = false;
  warmup_.clear();
  clearSums();
  b_prior_ = 0;
  scale_abs_sum_ = scale_weight_ = 0;
  scale_count_ = 0;
  pending_.clear();
  recent_sizes_.clear();
  recent_probe_.clear();
  recent_next_ = 0;
  recent_sum_ = recent_sum_sq_ = 0;
  recent_push_sum_ = 0;
  recent_pushes_ = 0;
  samples_since_probe_ = std::numeric_limits<uint64_t>::max() / 2;
  far_.clear();
  probes_sent_.clear();
  accepted_ = rejected_ = ignored_ = shifts_ = 0;
}

void LinkEstimator::clearSums() {
  w_sum_ = mean_x_ = mean_y_ = cxx_ = cxy_ = cyy_ = 0;
  v_sum_ = v_x_ = v_xx_ = 0;
  f_sum_ = f2_sum_ = 0;
}

double LinkEstimator::packetsOf(size_t bytes) const {
  const size_t p = spec_.packet_bytes;
  return static_cast<double>(bytes / p + (bytes % p != 0 ? 1 : 0));
}

double LinkEstimator::predict(size_t bytes) const {
  return std::max(0.0, predictPackets(packetsOf(bytes)));
}

double LinkEstimator::predictPackets(double x) const { return currentLine(nullptr).at(x); }

double LinkEstimator::minSlope() const {
  return static_cast<double>(spec_.packet_bytes) * 8.0 / spec_.max_bits_per_second;
}

bool LinkEstimator::slopeIdentified() const {
  // b is identified when the sizes still weighted in spread enough relative to their mean; the
  // threshold is a quarter of the exploration trigger so that exploration keeps it identified.
  const double var_x = w_sum_ > 0 ? cxx_ / w_sum_ : 0.0;
  return var_x > 0 && std::sqrt(var_x) >= 0.25 * spec_.identifiability_cv * std::max(mean_x_, 1.0);
}

LinkEstimator::Line LinkEstimator::currentLine(bool* identified) const {
  Line line;
  if (!bootstrapped_) {
    // Proportional prior: all time is per-packet time until a and b can be told apart.
    std::vector<double> per_packet;
    std::vector<double> times;
    for (const Sample& s : warmup_) {
      times.push_back(s.y);
      if (s.x > 0) per_packet.push_back(s.y / s.x);
    }
    if (!per_packet.empty()) {
      line.b = median(per_packet);
    } else {
      line.a = median(times);
    }
    if (identified) *identified = false;
    return line;
  }
  const bool ok = slopeIdentified();
  // Weighted least squares under b >= b_min (a per-packet time is positive; b_min is tiny, see
  // the spec) and a + b * x_lo >= 0 (no size in recent use takes negative time). a itself may
  // be negative: a token-bucket shaper lets the first packets after idle through free, a ~ -b
  // per packet its bucket holds; bounding it at one packet (a >= -b) made probes that a small
  // bucket carries in part disagree with every line the fit allowed. The constrained optimum
  // lies on the edge that binds: b = b_min with a = mean y - b_min mean x, or a = -b x_lo with
  // the slope through (x_lo packets, 0 s).
  const double b_min = minSlope();
  const double x_lo = smallestRecentSize();
  line.b = std::max(b_min, ok ? cxy_ / cxx_ : b_prior_);
  line.a = mean_y_ - line.b * mean_x_;
  if (line.a + line.b * x_lo < 0) {
    const double u = mean_x_ - x_lo;  // mean of x - x_lo
    if (ok) {
      line.b = (cxy_ + w_sum_ * u * mean_y_) / (cxx_ + w_sum_ * u * u);
    } else if (u > 0) {
      line.b = mean_y_ / u;
    }
    line.b = std::max(b_min, line.b);
    line.a = -line.b * x_lo;
  }
  if (identified) *identified = ok;
  return line;
}

double LinkEstimator::predictionVariance(double x, double prediction) const {
  if (w_sum_ <= 0) return 0.0;
  // Var(mean_y + b (x - mean_x)) in units of the relative noise variance, then made relative.
  double h = v_sum_ / (w_sum_ * w_sum_);
  if (slopeIdentified()) {
    const double dx = x - mean_x_;
    h += dx * dx * v_xx_ / (cxx_ * cxx_) + 2.0 * dx * v_x_ / (w_sum_ * cxx_);
  }
  const double pred = std::max(prediction, kMinPrediction);
  return std::max(0.0, h) / (pred * pred);
}

LinkFit LinkEstimator::fit() const {
  LinkFit out;
  out.packet_bytes = spec_.packet_bytes;
  bool identified = false;
  const Line line = currentLine(&identified);
  out.a = line.a;
  out.b = line.b;
  if (!bootstrapped_) {
    out.a_stderr = out.b_stderr = warmup_.empty() ? 0.0 : kInf;
    out.samples = warmup_.size();
    return out;
  }
  out.samples = accepted_;
  out.valid = identified;

  // Weighted residual sum of squares for this (a, b), from the centred sums.
  const double offset = mean_y_ - line.a - line.b * mean_x_;
  const double rss =
      std::max(0.0, cyy_ - 2.0 * line.b * cxy_ + line.b * line.b * cxx_ + w_sum_ * offset * offset);
  out.r2 = cyy_ > 0 ? std::clamp(1.0 - rss / cyy_, 0.0, 1.0) : (rss > 0 ? 0.0 : 1.0);

  // Relative noise variance: each residual has variance sigma^2 / p, so E[rss] ~ sigma^2 * (F - 2
  // F2 / F), the forgetting-weighted count minus the two fitted parameters' share.
  const double dof = f_sum_ > 0 ? f_sum_ - 2.0 * f2_sum_ / f_sum_ : 0.0;
  if (dof <= 1e-9 || cxx_ <= 0 || w_sum_ <= 0) {
    out.a_stderr = out.b_stderr = kInf;
    return out;
  }
  const double sigma2 = rss / dof;
  // Sandwich covariance: the weights mix precision (1/prediction^2) with forgetting, so
  // Var(b) = sigma^2 sum f^2 p (x - mean)^2 / Cxx^2 rather than sigma^2 / Cxx.
  const double var_b = sigma2 * v_xx_ / (cxx_ * cxx_);
  const double var_mean_y = sigma2 * v_sum_ / (w_sum_ * w_sum_);
  const double cov_mean_y_b = sigma2 * v_x_ / (w_sum_ * cxx_);
  const double var_a = var_mean_y + mean_x_ * mean_x_ * var_b - 2.0 * mean_x_ * cov_mean_y_b;
  out.b_stderr = std::sqrt(std::max(0.0, var_b));
  out.a_stderr = std::sqrt(std::max(0.0, var_a));
  return out;
}

void LinkEstimator::addSample(size_t bytes, double seconds, bool probe) {
  if (!std::isfinite(seconds) || seconds < 0) {
    ++ignored_;
    return;
  }
  const Sample s{packetsOf(bytes), seconds};
  noteSize(s.x, probe);

  if (!bootstrapped_) {
    warmup_.push_back(s);
    if (warmup_.size() > kWarmupCapacity) warmup_.erase(warmup_.begin());
    tryBootstrap();
    return;
  }

  if (!slopeIdentified() &&
      std::abs(s.x - mean_x_) > spec_.identifiability_cv * std::max(mean_x_, 1.0)) {
    addFarSample(s);
    return;
  }

  const double prediction = predictPackets(s.x);
  const double r = relativeResidual(s.y, prediction);
  // Judge the innovation, not the bare residual: a young fit predicts loosely, and its own
  // uncertainty must not be mistaken for stalls.
  const double spread = std::sqrt(1.0 + predictionVariance(s.x, prediction));
  const double scale = robustScale() * spread;
  if (std::abs(r) <= spec_.outlier_sigma * scale) {
    addToFit(s, prediction);
    rememberResidual(r / spread);
    // A typical sample refutes the pending outliers: a link change is only believed from
    // unbroken evidence, because stalls also come in bursts. One that passes but leans the
    // same way as they do (beyond 2 sigma) does not: where a dominates, a changed b moves small
    // payloads too little to fail the gate, and they must not hide the change.
    if (std::abs(r) <= kLeaningSigma * scale) {
      pending_.clear();
    } else {
      std::erase_if(pending_, [&](const auto& e) { return (e.second > 0) != (r > 0); });
    }
    ++accepted_;
  } else {
    ++rejected_;
    handleRejected(s, r);
  }
}

double LinkEstimator::robustScale() const {
  const double jitter = scale_weight_ > 0 ? kMeanAbsToSigma * scale_abs_sum_ / scale_weight_ : 0.0;
  const double cold =
      kColdScale * std::max(0.0, 1.0 - static_cast<double>(scale_count_) / kColdSamples);
  return std::clamp(std::max(jitter, cold), kMinRelativeScale, kMaxRelativeScale);
}

void LinkEstimator::rememberResidual(double relative_residual) {
  scale_abs_sum_ = kScaleForgetting * scale_abs_sum_ + std::abs(relative_residual);
  scale_weight_ = kScaleForgetting * scale_weight_ + 1.0;
  ++scale_count_;
}

void LinkEstimator::addToFit(const Sample& s, double prediction) {
  const double lambda = spec_.forgetting;
  const double lambda2 = lambda * lambda;
  // Timing jitter grows with the transfer (queueing, cross traffic), so the fit minimises
  // relative error: weight 1 / prediction^2, taken a priori so it does not depend on this
  // sample's own noise.
  // The floor stops one sample a wrong line predicts near zero from outweighing all others, and
  // so does one packet's time at the fitted b: behind a token bucket (a ~ -b) a one-packet
  // sample is predicted to take next to nothing, and weighted by that alone it made every size
  // held look alike, so b was never identified.
  const double clamped = std::max({prediction, kMinPrediction, kWeightFloor * mean_y_, b_prior_});
  const double p = 1.0 / (clamped * clamped);

  w_sum_ *= lambda;
  cxx_ *= lambda;
  cxy_ *= lambda;
  cyy_ *= lambda;
  v_sum_ *= lambda2;
  v_x_ *= lambda2;
  v_xx_ *= lambda2;
  f_sum_ = lambda * f_sum_ + 1.0;
  f2_sum_ = lambda2 * f2_sum_ + 1.0;

  w_sum_ += p;
  const double dx = s.x - mean_x_;
  const double dy = s.y - mean_y_;
  const double old_mean_x = mean_x_;
  mean_x_ += (p / w_sum_) * dx;
  mean_y_ += (p / w_sum_) * dy;
  cxx_ += p * dx * (s.x - mean_x_);
  cxy_ += p * dx * (s.y - mean_y_);
  cyy_ += p * dy * (s.y - mean_y_);

  // Re-centre the sandwich sums on the moved mean, then add the sample (its f is 1).
  const double shift = old_mean_x - mean_x_;
  v_xx_ += 2.0 * shift * v_x_ + shift * shift * v_sum_;
  v_x_ += shift * v_sum_;
  const double cx = s.x - mean_x_;
  v_sum_ += p;
  v_x_ += p * cx;
  v_xx_ += p * cx * cx;

  if (slopeIdentified()) b_prior_ = currentLine(nullptr).b;
}

void LinkEstimator::tryBootstrap() {
  const size_t n = warmup_.size();
  if (n < kWarmupMin) return;
  double mean = 0;
  for (const Sample& s : warmup_) mean += s.x;
  mean /= static_cast<double>(n);
  double var = 0;
  for (const Sample& s : warmup_) var += (s.x - mean) * (s.x - mean);
  var /= static_cast<double>(n);
  if (mean <= 0 || std::sqrt(var) < spec_.identifiability_cv * mean) return;

  const auto [fa, fb] = theilSenLine(warmup_);
  const Line line{fa, fb};

  // Eight samples cannot tell 5% jitter from 10%, so only clear stalls are dropped here, with the
  // same cold scale the gate starts from.
  const double threshold = spec_.outlier_sigma * kColdScale;
  bootstrapped_ = true;
  b_prior_ = line.b;
  for (const Sample& s : warmup_) {
    if (std::abs(relativeResidual(s.y, line.at(s.x))) <= threshold) {
      addToFit(s, line.at(s.x));
      ++accepted_;
    } else {
      ++rejected_;
    }
  }
  warmup_.clear();
}

void LinkEstimator::addFarSample(const Sample& s) {
  // With b unknown, one sample far from the sizes held decides the slope alone (its leverage is
  // 1), so nothing could ever contradict a stalled one. Hold such samples until two of them
  // agree on a line through the samples held; a stall agrees with nothing.
  far_.push_back(s);
  if (far_.size() > kFarCapacity) {
    far_.erase(far_.begin());
    ++rejected_;  // never confirmed
  }
  auto slopeThrough = [&](const Sample& t) {
    return std::max(0.0, (t.y - mean_y_) / (t.x - mean_x_));
  };
  const double tolerance = spec_.outlier_sigma * robustScale();
  for (size_t i = 0; i + 1 < far_.size(); ++i) {
    const Sample& other = far_[i];
    const double b = 0.5 * (slopeThrough(s) + slopeThrough(other));
    const Line line{std::max(-b * smallestRecentSize(), mean_y_ - b * mean_x_), b};
    if (std::abs(relativeResidual(s.y, line.at(s.x))) > tolerance ||
        std::abs(relativeResidual(other.y, line.at(other.x))) > tolerance)
      continue;
    // Stalls only ever delay: a pair with a clearly faster sample beneath it is more likely two
    // similar stalls than the link, so wait for the faster one to find its partner.
    const bool undercut = std::any_of(far_.begin(), far_.end(), [&](const Sample& t) {
      return relativeResidual(t.y, line.at(t.x)) < -tolerance;
    });
    if (undercut) continue;
    addToFit(other, line.at(other.x));
    addToFit(s, line.at(s.x));
    accepted_ += 2;
    rejected_ += far_.size() - 2;  // the ones left unconfirmed
    pending_.clear();
    far_.clear();
    return;
  }
}

void LinkEstimator::handleRejected(const Sample& s, double relative_residual) {
  pending_.emplace_back(s, relative_residual);
  if (pending_.size() > kPendingCapacity) pending_.erase(pending_.begin());

  // Only outliers on the same side as this one can be a new regime; stalls on the other side
  // in between are left out rather than resetting the count.
  const bool slower = relative_residual > 0;
  std::vector<Sample> same_side;
  for (const auto& [sample, r] : pending_)
    if ((r > 0) == slower) same_side.push_back(sample);
  const size_t need = spec_.shift_confirm_samples;
  if (same_side.size() < need) return;

  // Do enough of them agree on one line? Random stalls (10x here, 40x there) do not; a changed
  // link does. Each sample is judged against the robust line through the others, so a lone
  // sample at its own size (which any line through it would fit) cannot vouch for itself, and
  // stalls mixed in with a real change do not drag the line.
  const double tolerance = kShiftAgreement * spec_.outlier_sigma * robustScale();
  std::vector<Sample> agreeing;
  std::vector<Sample> others;
  for (size_t i = 0; i < same_side.size(); ++i) {
    others.clear();
    for (size_t j = 0; j < same_side.size(); ++j)
      if (j != i) others.push_back(same_side[j]);
    const auto [oa, ob] = theilSenLine(others);
    const Line without{oa, ob};
    if (std::abs(relativeResidual(same_side[i].y, without.at(same_side[i].x))) <= tolerance)
      agreeing.push_back(same_side[i]);
  }
  if (agreeing.size() < need) return;
  same_side = std::move(agreeing);
  const auto [fa, fb] = theilSenLine(same_side);
  const Line line{fa, fb};

  // Link change confirmed: refit from the samples that revealed it. Nothing of the old regime's
  // sums is kept (its weights were set by the old predictions and would distort the new fit);
  // its slope survives as b_prior_, used if the new samples do not spread in size.
  clearSums();
  for (const Sample& t : same_side) addToFit(t, line.at(t.x));
  rejected_ -= same_side.size();
  accepted_ += same_side.size();
  ++shifts_;
  pending_.clear();
  rejected_ += far_.size();
  far_.clear();
  // Seen at one size only, the change leaves b unknown: probe at once.
  if (!slopeIdentified())
    samples_since_probe_ = std::max<uint64_t>(samples_since_probe_, spec_.exploration_window);
}

double LinkEstimator::smallestRecentSize() const {
  if (recent_sizes_.empty()) return 1.0;
  return std::max(1.0, *std::min_element(recent_sizes_.begin(), recent_sizes_.end()));
}

}  // namespace tern::costmodel
