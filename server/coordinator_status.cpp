#include "server/coordinator_status.hpp"

#include <spdlog/fmt/fmt.h>

#include <map>
#include <string>
#include <utility>

namespace tern::server {

namespace {

// The further counters: the core's, then connections (refused before any message was read).
std::map<std::string, telemetry::CounterStatus> counters(const CoordinatorCore& core,
                                                         const AuthCounters& auth) {
  return {
      {"pushes_asked_again",
       {core.reasked(), "Round starts sent again to a worker after its push was refused."}},
      {"push_reports_unusable",
       {core.badReports(), "Tuner reports with a push that no tuner makes, recorded as zeros."}},
      {"steps_refused_non_finite",
       {core.stepsRefused(),
        "Rounds whose aggregated step would have made the model non-finite, not taken."}},
      {"pushes_clipped",
       {core.pushesClipped(),
        "Pushes whose norm was clipped to clip_multiple times the round's median push norm."}},
      {"evaluations_unusable",
       {core.counters().evaluations_unusable,
        "Federated evaluations dropped: not of the round's model, or not a loss and an accuracy."}},
      {"workers_benched",
       {core.benchedTotal(), "Times a worker was benched for missing its push rounds in a row."}},
      {"connections_admitted",
       {auth.admitted, "Worker connections whose CURVE key the allowlist admitted."}},
      {"connections_auth_refused",
       {auth.refused, "Worker connections refused: CURVE key not on the allowlist."}},
      {"connections_handshake_failed",
       {auth.handshake_failed,
        "Connections whose handshake failed (e.g. plaintext, wrong server key, a port check)."}},
      {"connections_guard_refused",
       {auth.guard_refused,
        "Plaintext connections the frame guard closed: for a message of too many frames, an "
        "oversized frame or not ZMTP 3 with the NULL mechanism, or past its connection limit."}}};
}

}  // namespace

telemetry::NodeStatus coordinatorStatus(const config::CoordinatorSettings& s,
                                        const CoordinatorCore& core, bool any_round_closed,
                                        const std::string& state, const AuthCounters& auth) {
  const RoundRecord& r = core.lastRecord();
  telemetry::NodeStatus st;
  st.role = "coordinator";
  st.name = "tern-coordinator";
  st.version = TERN_VERSION;
  st.state = state;
  st.round = r.round;
  st.rounds_completed = any_round_closed ? r.round + 1 : core.round();
  st.time_s = r.time_s;
  st.round_deadline_seconds = s.round_deadline_seconds;
  st.train_loss = r.train_loss;
  st.test_accuracy = core.accuracy();
  st.upload_bytes = r.upload_bytes;
  st.download_bytes = r.download_bytes;
  st.full_bytes = r.full_bytes;
  st.participants = r.participants;
  st.alive_workers = uint32_t(core.aliveWorkers());
  st.late_pushes = r.late_pushes;
  // The commonest reasons are always listed, at 0 until one happens, so that a dashboard's
  // query and an alert on their rate have a series from the start.
  for (const char* reason :
       {"envelope_unparseable", "bad_frame_count", "bad_version", "unknown_session",
        "late_or_future_round", "bad_payload", "non_finite_loss", "worker_failed", "duplicate"}) {
    st.rejected[reason] = 0;
  }
  for (const auto& [reason, n] : core.rejections()) st.rejected[reason] = n;
  st.counters = counters(core, auth);
  if (const auto& f = core.lastFederated()) {
    st.federated = telemetry::EvaluationStatus{f->round, f->loss, f->accuracy, f->rows};
  }
  for (const auto& w : r.workers) {
    telemetry::PeerStatus p;
    p.id = w.id;
    p.name = w.name;
    p.alive = w.alive;
    p.cap = w.alive ? w.cap : 0;
    p.share = w.benched ? 0.0 : w.share;  // a benched straggler is outside the plan's shares
    p.level = w.level;
    p.predicted_cost = w.predicted_cost;
    p.predicted_improvement = w.predicted_improvement;
    p.predicted_step = w.predicted_step;
    p.upload_bytes = w.upload_bytes;
    p.download_bytes = w.download_bytes;
    p.link = {w.link.a_seconds(), w.link.b_seconds_per_packet(), w.link.r2(),
              w.link.samples(),   w.link.packet_bytes(),         w.link.a_stderr(),
              w.link.b_stderr()};
    p.benched = w.benched;
    p.pushes_clipped = w.pushes_clipped;
    if (w.evaluation.known) {
      p.evaluation = telemetry::EvaluationStatus{w.evaluation.round, w.evaluation.loss,
                                                 w.evaluation.accuracy, w.evaluation.rows};
    }
    st.workers.push_back(std::move(p));
  }
  return st;
}

std::string systemdStatus(const telemetry::NodeStatus& st) {
  const std::string accuracy =
      st.test_accuracy ? fmt::format("{:.4f}", *st.test_accuracy) : std::string("not evaluated");
  return fmt::format("{}: round {}, accuracy {}, {} workers alive", st.state, st.rounds_completed,
                     accuracy, st.alive_workers);
}

}  // namespace tern::server
