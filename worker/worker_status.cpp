#include "worker/worker_status.hpp"

#include <map>
#include <string>
#include <utility>

#include "worker/worker_stats.hpp"

namespace tern::worker {

namespace {

// The further counters of /status and /metrics, each with what it counts.
std::map<std::string, telemetry::CounterStatus> counters(const WorkerStats& stats,
                                                         uint64_t auth_refused,
                                                         uint64_t handshake_failed) {
  return {
      {"probe_bytes", {stats.probe_bytes, "Bytes of link calibration probes sent."}},
      {"pushes_taken_back",
       {stats.taken_back, "Refused pushes whose content went back into the residual."}},
      {"non_finite_gradients",
       {stats.non_finite_gradients,
        "Pushes sent without a gradient: the local loss or gradient was not finite."}},
      {"residuals_dropped",
       {stats.residuals_dropped,
        "Times the error feedback's residual was dropped: the gradient plus it overflowed."}},
      {"pushes_trimmed_to_max_message",
       {stats.trimmed, "Threshold pushes cut to fit the coordinator's max_message_bytes."}},
      {"pushes_trimmed_to_deadline",
       {stats.deadline_trimmed, "Pushes held below the cap so the link carries them in time."}},
      {"pushes_past_deadline",
       {stats.deadline_late, "Pushes that cannot shrink and the link carries past the deadline."}},
      {"rejoins",
       {stats.rejoins,
        "Joins after the first: the coordinator went silent, restarted or refused the session."}},
      {"stale_welcomes", {stats.stale_welcomes, "Welcomes answering an earlier join, ignored."}},
      {"repushes",
       {stats.repushes, "Rounds the coordinator asked for again after refusing the push."}},
      {"connections_auth_refused",
       {auth_refused, "Connections the coordinator refused: this worker's key is not listed."}},
      {"connections_handshake_failed",
       {handshake_failed, "Handshakes with the coordinator that failed (modes or keys differ)."}},
      {"trainer_failures",
       {stats.trainer_failures,
        "Rounds sat out: the trainer failed (crashed, timed out, answered wrongly)."}},
      {"evaluations", {stats.evaluations, "Federated evaluations reported with pushes."}},
      {"evaluations_unusable",
       {stats.evaluations_unusable,
        "The trainer's evaluations dropped: a loss or accuracy not finite, or an accuracy outside "
        "[0, 1] (the push went without it)."}}};
}

// The external trainer's counters, each with what it counts.
void addTrainerCounters(const ExternalTrainerCounters& t,
                        std::map<std::string, telemetry::CounterStatus>& out) {
  out["trainer_connections"] = {t.connections,
                                "Trainer Hellos accepted: the first and every restart."};
  out["trainer_hellos_refused"] = {
      t.hellos_refused, "Trainer Hellos refused: another layout or an unfit description."};
  out["trainer_not_connected"] = {t.no_trainer,
                                  "Gradient requests failed: no trainer was connected."};
  out["trainer_timeouts"] = {t.timeouts, "Gradient requests the trainer did not answer in time."};
  out["trainer_errors"] = {t.trainer_errors,
                           "Gradient requests the trainer said it could not fit."};
  out["trainer_bad_answers"] = {t.bad_answers,
                                "Trainer answers of the wrong size or kind, refused."};
  out["trainer_malformed"] = {
      t.malformed,
      "Trainer messages that were no trainer-protocol envelope, or a worker's message."};
  out["trainer_late_answers"] = {
      t.late_answers,
      "Trainer answers to no waiting request (given up, or an id never asked), ignored."};
}

// The trainer as /status shows it: the core's failures and, for an external one, its connection.
telemetry::TrainerStatus trainerStatus(const config::WorkerSettings& s, const WorkerStats& stats,
                                       const DaemonCounters& daemon) {
  telemetry::TrainerStatus t;
  t.kind = s.trainer.kind;
  t.failures = stats.trainer_failures;
  t.last_error = stats.last_trainer_error;
  if (daemon.trainer) {
    t.connected = daemon.trainer->connected;
    t.framework = daemon.trainer->framework;
    if (t.last_error.empty()) t.last_error = daemon.trainer->last_error;
  }
  return t;
}

}  // namespace

telemetry::NodeStatus workerStatus(const config::WorkerSettings& s, const WorkerCore& core,
                                   const DaemonCounters& daemon, double time_s,
                                   const std::string& state) {
  const auto& stats = core.stats();
  telemetry::NodeStatus st;
  st.role = "worker";
  st.name = s.name;
  st.version = TERN_VERSION;
  st.state = state;
  st.round = core.replicaRound();
  st.rounds_completed = stats.rounds;
  st.time_s = time_s;
  st.round_deadline_seconds = core.roundDeadline();
  st.train_loss = stats.last_loss;
  st.upload_bytes = stats.pushed_bytes + stats.probe_bytes;  // as the coordinator counts them
  st.download_bytes = stats.received_bytes;
  st.alive_workers = core.joined() ? 1 : 0;
  st.rejected = {{"refused_coordinator_message", stats.rejected}, {"malformed", daemon.malformed}};
  st.counters = counters(stats, daemon.auth_refused, daemon.handshake_failed);
  if (daemon.trainer) addTrainerCounters(*daemon.trainer, st.counters);
  st.trainer = trainerStatus(s, stats, daemon);
  auto fit = core.link().fit();
  telemetry::PeerStatus self;
  self.id = core.id();
  self.name = s.name;
  self.alive = core.joined();
  self.cap = core.cap();
  self.level = stats.last_level;
  self.predicted_cost = stats.last_predicted_cost;
  self.predicted_improvement = stats.last_predicted_improvement;
  self.predicted_step = stats.last_step;
  self.upload_bytes = stats.pushed_bytes + stats.probe_bytes;
  self.download_bytes = stats.received_bytes;
  self.share = stats.data_share;
  self.link = {fit.a, fit.b, fit.r2, fit.samples, fit.packet_bytes, fit.a_stderr, fit.b_stderr};
  if (stats.last_eval_rows > 0) {
    self.evaluation = telemetry::EvaluationStatus{stats.last_eval_round, stats.last_eval_loss,
                                                  stats.last_eval_accuracy, stats.last_eval_rows};
  }
  st.workers.push_back(std::move(self));
  return st;
}

}  // namespace tern::worker
