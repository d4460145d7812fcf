#include "worker/push_builder.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"

namespace tern::worker {

uint32_t largestFittingLevel(const compression::Compressor& c, CountKind kind, uint32_t dim,
                             uint64_t max_bytes) {
  // A count of dim needs no index section, so its bound can be below that of dim - 1: a count is
  // sized at the larger of the two, which keeps the size monotone in the count. Stochastic
  // sparsification sends a random count near `level`: its level is sized with room for 6
  // standard deviations and a few more. The hard threshold takes the level as a limit on its
  // count. A compressor whose count the level does not bound is sized at its largest push.
  auto size = [&](uint32_t count) {
    size_t bytes = c.encodedBytes(dim, count);
    if (count == dim && dim >= 2) bytes = std::max(bytes, c.encodedBytes(dim, dim - 1));
    return bytes;
  };
  if (!c.levelLimitsCount()) return size(dim) <= max_bytes ? dim : 0;
  auto fits = [&](uint32_t level) {
    uint32_t count = level;
    if (kind == CountKind::random) {
      const double spread = std::ceil(6.0 * std::sqrt(double(level))) + 8.0;
      count = uint32_t(std::min<double>(dim, double(level) + spread));
    }
    return size(count) <= max_bytes;
  };
  if (!fits(1)) return 0;
  uint32_t lo = 1, hi = dim;  // fits(lo); the answer is in [lo, hi]
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

namespace {

std::unique_ptr<compression::ErrorFeedback> makeFeedback(const PushOptions& o, double threshold) {
  compression::CompressorSpec cspec = o.compressor;
  if (threshold > 0.0) cspec.threshold = threshold;
  auto inner = compression::makeCompressor(cspec);
  // Only error feedback reads what a push decodes to (remember() keeps nothing without it).
  inner->setDecodedWanted(o.strategy.error_feedback);
  return std::make_unique<compression::ErrorFeedback>(std::move(inner), o.strategy.error_feedback,
                                                      o.corrected_scratch);
}

}  // namespace

PushBuilder::PushBuilder(const PushOptions& options, double threshold,
                         std::optional<double> smoothness)
    : options_(options),
      smoothness_(smoothness),
      compressor_(makeFeedback(options, threshold)),
      policy_(options.tuning, options.packet_bytes, smoothness.value_or(1.0)),
      threshold_(threshold) {}

uint32_t PushBuilder::limitTo(uint64_t max_bytes, uint32_t dim) {
  size_cap_ =
      largestFittingLevel(compressor_->inner(), options_.strategy.count_kind, dim, max_bytes);
  return *size_cap_;
}

size_t PushBuilder::largestPush(uint32_t dim) {
  const auto& inner = compressor_->inner();
  return std::max(inner.encodedBytes(dim, dim), inner.encodedBytes(dim, dim >= 2 ? dim - 1 : dim));
}

void PushBuilder::roundStarts(double now, std::optional<double> deadline_left,
                              std::optional<double> learning_rate) {
  round_started_at_ = now;
  deadline_left_ = deadline_left;
  // The tuner prices its levels at the step the coordinator applies (tuning.step: coordinator);
  // a step that is no step leaves it at the paper's.
  step_.reset();
  if (!learning_rate) return;
  const config::StepRule rule = options_.tuning.step;
  if (rule == config::StepRule::kCoordinator ||
      (rule == config::StepRule::kAuto && smoothness_ && *learning_rate * *smoothness_ < 2.0))
    step_ = *learning_rate;
}

void PushBuilder::setThreshold(double threshold) {
  if (threshold == threshold_) return;
  // A new threshold starts a new residual: the old one was shaped by the old threshold.
  compressor_ = makeFeedback(options_, threshold);
  threshold_ = threshold;
}

void PushBuilder::takeBack(uint64_t round, WorkerStats& stats) {
  for (auto it = sent_.begin(); it != sent_.end(); ++it) {
    if (it->first != round) continue;
    // Never applied: what it carried is still owed, so the residual holds it again.
    if (compressor_->takeBack(it->second)) {
      ++stats.taken_back;
      spdlog::info("push for round {} was refused: its content goes out with a later one", round);
    }
    sent_.erase(it);
    return;
  }
}

void PushBuilder::remember(uint64_t round, compression::SparseGradient carried) {
  if (!compressor_->enabled()) return;
  std::erase_if(sent_, [round](const auto& s) { return s.first == round; });
  sent_.emplace_back(round, std::move(carried));
  while (sent_.size() > 2) sent_.pop_front();
}

// What the fitted link carries of a push within the round's deadline.
struct PushBuilder::InTime {
  uint32_t level = 0;  // the largest level that arrives in time, at most `most` (at least 1)
  bool bound = false;  // a push at `most` would not: level is below it (or cannot be, if the
                       // compressor has no level)
  double seconds_at_most = 0.0;                 // a push at `most` on the fitted link
  double left = 0.0;                            // seconds left of the deadline
  double budget = 0.0;                          // the seconds the push has of them
  bool probe_ahead = false;                     // the budget counts a probe going ahead of the push
  double a = 0.0, b = 0.0, packet_bytes = 1.0;  // the fit it priced with
  // A message of wire_bytes on the fitted link.
  double seconds(double wire_bytes) const { return a + b * std::ceil(wire_bytes / packet_bytes); }
};

// The largest level (at most `most`) whose push, with the probe that goes ahead of it, the fitted
// link carries within the round's deadline; `most` when no deadline was said or no link is
// fitted. overhead_bytes: the push's bytes besides the codec's.
PushBuilder::InTime PushBuilder::inTime(uint32_t most, size_t overhead_bytes, uint32_t dim,
                                        LinkMonitor& link, double now) {
  InTime t;
  t.level = most;
  const double deadline = deadline_left_ ? *deadline_left_ : round_deadline_.value_or(0.0);
  if (deadline <= 0.0) return t;
  const std::optional<costmodel::LinkFit> fit = policy_.usableFit(link.fit());
  if (!fit || !(fit->b > 0.0) || fit->packet_bytes == 0) return t;
  t.a = std::max(fit->a, 0.0);
  t.b = fit->b;
  t.packet_bytes = double(fit->packet_bytes);
  const auto& inner = compressor_->inner();
  // The deadline runs at the coordinator from when it sent the round start: its transit here
  // (with the update it carries) and the fit's error are not seen by this clock, so a fifth of
  // what is left is kept for them.
  constexpr double kDeadlineShare = 0.8;
  t.left = deadline - (now - round_started_at_);
  t.budget = kDeadlineShare * t.left;
  const std::optional<size_t> probe = link.peekProbe(now);
  if (probe) t.budget -= t.seconds(double(*probe));
  const double packets = std::floor((t.budget - t.a) / t.b);
  uint32_t level = 0;
  if (packets >= 1.0 && packets * t.packet_bytes > double(overhead_bytes)) {
    const double codec_bytes = std::min(packets * t.packet_bytes - double(overhead_bytes), 1e18);
    level = largestFittingLevel(inner, options_.strategy.count_kind, dim, uint64_t(codec_bytes));
  }
  t.seconds_at_most = t.seconds(double(overhead_bytes + inner.encodedBytes(dim, most)));
  t.probe_ahead = probe.has_value();
  if (level >= most) return t;
  t.bound = true;
  // A compressor without a level sends what it sends: the push goes whole, and late.
  if (inner.levelLimitsCount()) t.level = std::max<uint32_t>(level, 1);
  return t;
}

namespace {

// The coordinates a push of dimension d carries: its decoded form's (all d when a scheme that
// sends every coordinate was not asked for one).
uint32_t carried(const compression::SparseGradient& decoded, uint32_t d) {
  return decoded.dim == 0 ? d : uint32_t(decoded.nonZeros());
}

// Warns, on the first such push and every 100th (count), that `what` was held to the deadline:
// the journal is not flooded, and the count is in the metrics.
void sayInTime(uint64_t round, double budget, double left, bool probe_ahead,
               const std::string& what, double seconds, const std::string& done, uint64_t count) {
  if (count != 1 && count % 100 != 0) return;
  spdlog::warn(
      "round {}: {} takes about {:.2f} s on this link, more than the {:.2f} s a push has (four "
      "fifths of the {:.2f} s left of the round's deadline{}): {} (raise round_deadline_seconds "
      "at the coordinator or lower the cap to avoid it; such pushes so far: {})",
      round, what, seconds, std::max(budget, 0.0), std::max(left, 0.0),
      probe_ahead ? ", less the probe ahead of it" : "", done, count);
}

}  // namespace

void PushBuilder::reportDeadline(uint64_t round, const InTime& t, uint32_t most, uint32_t level,
                                 size_t overhead, uint32_t dim, WorkerStats& stats) {
  auto& inner = compressor_->inner();
  const auto* threshold = dynamic_cast<const compression::ThresholdCompressor*>(&inner);
  if (threshold != nullptr && threshold->lastPassed() > most) ++stats.trimmed;
  if (!t.bound) return;
  const std::string rest =
      options_.strategy.error_feedback ? "the rest stays in the residual" : "the rest is dropped";
  auto say = [&](const std::string& what, double seconds, const std::string& done, uint64_t count) {
    sayInTime(round, t.budget, t.left, t.probe_ahead, what, seconds, done, count);
  };
  if (!inner.levelLimitsCount()) {
    say("a push of compressor '" + options_.compressor.name + "'", t.seconds_at_most,
        "it goes whole, and late (a compressor with a level can send less)", ++stats.deadline_late);
  } else if (threshold != nullptr && threshold->lastPassed() > t.level) {
    say("a push of the " + std::to_string(threshold->lastPassed()) +
            " coordinates over the threshold",
        t.seconds(double(overhead + inner.encodedBytes(dim, threshold->lastPassed()))),
        "sending the largest " + std::to_string(t.level) + ", " + rest, ++stats.deadline_trimmed);
  } else if (threshold == nullptr && level == t.level) {
    say("a push at the cap of " + std::to_string(most) + " coordinates", t.seconds_at_most,
        "sending " + std::to_string(level) + ", " + rest, ++stats.deadline_trimmed);
  }
}

std::optional<std::span<const float>> PushBuilder::corrected(std::span<const float> grad,
                                                             uint64_t round, bool again,
                                                             WorkerStats& stats) {
  // Asked again, the refused push is taken back (if its error has not done so already): the
  // residual then holds this round's gradient (the replica and the minibatch are the same) and
  // everything else still owed, and it goes out as it is, so the gradient is never added twice.
  // Without feedback the gradient is simply computed again.
  if (again) {
    if (!compression::detail::allFinite(grad)) return std::nullopt;
    takeBack(round, stats);
    const std::span<const float> v = compressor_->resendResidual(grad.size());
    if (!v.empty()) return v;
  }
  return compressor_->correctedIfFinite(grad);
}

PushBuilder::Built PushBuilder::build(Message& m, std::span<const float> grad, double loss,
                                      bool again, uint32_t cap_said, LinkMonitor& link, double now,
                                      double compute_seconds, Rng& rng, WorkerStats& stats) {
  auto* p = m.envelope.mutable_push();
  const uint64_t round = p->round();
  const auto d = uint32_t(grad.size());
  // An overflow (local steps with too large a local_lr, extreme data, a residual grown past a
  // float) must neither end the daemon (the compressors refuse non-finite values) nor reach the
  // residual. The worker says so with a push whose loss is not finite and carries nothing: the
  // coordinator refuses it at once, so the round need not wait for this worker, and asks again.
  auto failed = [&](const std::string& why) {
    ++stats.non_finite_gradients;
    spdlog::warn("round {}: {}; pushing nothing", round, why);
    p->set_local_loss(std::numeric_limits<double>::quiet_NaN());
    p->set_compute_seconds(compute_seconds);
    return Built{false, true};
  };
  const auto corrected_v =
      std::isfinite(loss) ? corrected(grad, round, again, stats) : std::nullopt;
  if (!corrected_v)
    return failed("the local loss or gradient is not finite (loss " + std::to_string(loss) + ")");
  const std::span<const float> v = *corrected_v;
  uint32_t cap = std::clamp<uint32_t>(std::min(cap_said, size_cap_.value_or(UINT32_MAX)), 1, d);
  // What the push carries besides the codec's bytes: its envelope, with every report field
  // present (the level at its largest, the cap), and the two frames' headers (the payload's
  // long one). The link fit prices wire bytes, so the tuner must see these too.
  setReport(*p, loss, compute_seconds, cap, {1.0, 1.0, 1.0});
  const size_t overhead = zmtpWireBytes(m.envelope.ByteSizeLong(), 256) - 256;
  const auto& inner = compressor_->inner();
  // A push the link carries past the round's deadline misses its round: its level is held to
  // what arrives in time. The hard threshold's count follows the data: its level is the most a
  // push may carry.
  const uint32_t most =
      inner.hasLevel() ? cap : std::min<uint32_t>(size_cap_.value_or(UINT32_MAX), d);
  // The link's probes are sized by the largest push this worker may send
  // (LinkEstimator::setLargestPush).
  link.setLargestPush(overhead + inner.encodedBytes(d, most));
  const InTime in_time = inTime(most, overhead, d, link, now);
  if (inner.hasLevel()) cap = in_time.level;
  auto decision = policy_.choose(v, cap, inner, link.fit(), overhead, step_.value_or(0.0), grad,
                                 compute_seconds);
  const uint32_t level = std::clamp<uint32_t>(decision.level, 1, cap);
  compression::Compressed compressed;
  try {
    compressed = compressor_->compressCorrected(inner.hasLevel() ? level : in_time.level, rng);
  } catch (const std::exception& e) {
    // The gradient was finite, so the residual plus it overflowed (the residual holds a huge
    // earlier gradient): kept, it would fail every later push the same way. It is dropped: what
    // it owed is lost, the next round starts from the gradient alone.
    if (compressor_->enabled()) {
      compressor_->reset();
      ++stats.residuals_dropped;
    }
    return failed(e.what());
  }
  reportDeadline(round, in_time, most, level, overhead, d, stats);
  // The level reported is what the push carries: a scheme without one (identity, fp16, qsgd, the
  // threshold) sends as many coordinates as its data gives, whatever the cap.
  const uint32_t sent = inner.hasLevel() ? level : carried(compressed.decoded, d);
  stats.last_level = sent;
  // The tuner's predictions are for the level it chose; a level clamped into [1, cap] has none.
  const bool as_chosen = level == decision.level;
  stats.last_predicted_cost = as_chosen ? decision.predicted_cost : 0.0;
  stats.last_predicted_improvement = as_chosen ? decision.predicted_improvement : 0.0;
  stats.last_step = as_chosen ? decision.step : 0.0;
  remember(round, std::move(compressed.decoded));
  stats.last_loss = loss;
  ++stats.rounds;
  setReport(*p, loss, compute_seconds, sent,
            {stats.last_predicted_cost, stats.last_predicted_improvement, stats.last_step});
  m.payload = std::move(compressed.bytes);
  return {true, !in_time.bound || in_time.probe_ahead};
}

void PushBuilder::setReport(wire::Push& p, double loss, double compute_seconds, uint32_t level,
                            const Predicted& predicted) {
  p.set_local_loss(loss);
  p.set_compute_seconds(compute_seconds);
  p.set_level(level);
  p.set_predicted_cost(predicted.cost);
  p.set_predicted_improvement(predicted.improvement);
  p.set_predicted_step(predicted.step);
}

}  // namespace tern::worker
