#pragma once
// The worker's view of its own uplink (issue: every worker measures its own link): it stamps
// each push and probe when handed to the socket, turns the matching ack into one transmission
// time (ack received - push sent - coordinator hold), feeds the online estimator, and schedules
// probes: the calibration train at join, exploration probes when recent sizes cannot identify
// the slope.
//
// Probes go out one at a time and only while nothing else is unacknowledged, so a probe never
// waits in the socket behind a push or another probe: its time is its own bytes crossing the
// link, not the tail of someone else's transfer. Pushes are never held back; one handed over
// behind a probe is timed from the probe's ack.
//
// Bytes are counted as they go on the wire: ZMTP 3 frames, each with its own frame header.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "common/config/settings.hpp"
#include "common/costmodel/calibration_times.hpp"
#include "common/costmodel/link_estimator.hpp"
#include "tern.pb.h"

namespace tern::worker {

// ZMTP 3 frame header: a flags octet, then the size in one octet (up to 255) or in eight.
size_t zmtpFrameHeaderBytes(size_t frame_bytes);
// Bytes on the TCP stream for a message of an envelope frame and an optional payload frame.
size_t zmtpWireBytes(size_t envelope_bytes, size_t payload_bytes);
// The payload that makes a message with this envelope occupy exactly `wire_bytes` on the TCP
// stream (0 when the envelope alone is that large).
size_t zmtpPayloadFor(size_t wire_bytes, size_t envelope_bytes);

class LinkMonitor {
 public:
  // ack_timeout_seconds: a push or probe unacknowledged for this long is given up (no sample),
  // so a lost message cannot hold the probe queue forever.
  LinkMonitor(const config::LinkSettings& settings, double ack_timeout_seconds);

  // Key of a push: its round; of a probe: its probe id (high bit set to keep them apart).
  static uint64_t pushKey(uint64_t round) { return round; }
  static uint64_t probeKey(uint64_t probe_id) { return probe_id | (1ull << 63); }
  static bool isProbeKey(uint64_t key) { return (key >> 63) != 0; }

  // A push or probe was created and will be handed to the socket: it is unacknowledged from now.
  void issued(uint64_t key, double now);
  // It was handed to the socket now, wire_bytes long on the TCP stream.
  void sent(uint64_t key, size_t wire_bytes, double now);
  // An ack (or a refusal sent as the message arrived) came; returns the transmission time when
  // it matched a send that can be timed. The coordinator answers in order, so anything sent
  // before the answered message and still unanswered was lost or refused unseen: it is dropped
  // without a sample, and so is any message that queued behind it (its start is unknown).
  std::optional<double> acked(uint64_t key, double hold_seconds, double now);

  // Queues the calibration train (at the first join, and at a re-join before the fit was made).
  void queueCalibration();
  // Queues an exploration probe if the estimator asks for one now (charged to its budget).
  void queueExploration(double now);
  // The next queued probe size (bytes on the wire) when nothing is unacknowledged; pops it.
  // Calibration probes the train's smaller ones say would take longer than
  // link.calibration_max_seconds are passed over (counted in skippedCalibrationProbes()), and so
  // are those no push could use (above the size covering the largest push, every one while that
  // push fits in one packet: LinkEstimator::setLargestPush).
  std::optional<size_t> nextProbe(double now);
  // The size nextProbe would pop now, without popping it.
  std::optional<size_t> peekProbe(double now);
  // The largest push this worker may send now (its cap's), wire bytes (LinkEstimator); ignored
  // while the coordinator plans by link time.
  void setLargestPush(size_t wire_bytes) {
    estimator_.setLargestPush(plans_by_link_time_ ? 0 : wire_bytes);
  }
  // The welcome's plans_by_link_time: the coordinator sizes caps by link times beyond the caps
  // in force, so every calibration size is worth a probe.
  void setPlansByLinkTime(bool plans) {
    plans_by_link_time_ = plans;
    if (plans) estimator_.setLargestPush(0);
  }
  bool awaitingAck() const { return !pending_.empty(); }
  size_t queuedProbes() const { return queue_.size(); }
  // Sends given up without an ack (timed out or passed over by a later ack).
  uint64_t unacknowledged() const { return unacknowledged_; }
  uint64_t skippedCalibrationProbes() const { return skipped_calibration_; }

  uint64_t nextProbeId() { return ++probe_id_; }
  void reset();

  costmodel::LinkFit fit() const { return estimator_.fit(); }
  wire::LinkModel toWire() const;
  bool enabled() const { return settings_.measure; }
  // A round starts: pauses or resumes measurement by link.alternate_rounds (a benchmark aid).
  // While paused nothing new is timed and no exploration probe is queued; sends already timed
  // still take their sample when acked; the join-time calibration train still goes out (timed
  // only in active rounds).
  void atRound(uint64_t round);
  bool active() const { return settings_.measure && !paused_; }
  uint64_t samples() const { return estimator_.fit().samples; }

 private:
  struct Pending {
    uint64_t order = 0;  // issue order
    double issued_at = 0.0;
    std::optional<double> sent_at;  // handed to the socket
    size_t bytes = 0;
    bool untimed = false;  // queued behind a message that was never acked
  };
  void drop(std::map<uint64_t, Pending>::iterator it);
  void expire(double now);
  void skipUnneededCalibration();
  // Whether a calibration probe of `bytes` could change a push's choice (see setLargestPush).
  bool usefulCalibration(size_t bytes) const;

  config::LinkSettings settings_;
  double ack_timeout_;
  costmodel::LinkEstimator estimator_;
  costmodel::CalibrationTimes probe_times_;  // timed probes: the fastest time per size
  std::map<uint64_t, Pending> pending_;      // key -> unacknowledged push or probe
  std::deque<size_t> queue_;                 // probe sizes waiting for a quiet link
  std::optional<double> last_done_;          // latest (ack received - hold) seen
  uint64_t order_ = 0;
  uint64_t probe_id_ = 0;
  uint64_t unacknowledged_ = 0;
  uint64_t skipped_calibration_ = 0;
  bool calibrated_ = false;
  size_t train_next_ = 0;    // the train's probes handed out since the first join
  size_t train_queued_ = 0;  // of them, still at the front of queue_
  bool paused_ = false;
  bool plans_by_link_time_ = false;
};

}  // namespace tern::worker
