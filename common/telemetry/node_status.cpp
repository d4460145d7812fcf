#include "common/telemetry/node_status.hpp"

#include "common/telemetry/json.hpp"

namespace tern::telemetry {

uint64_t rejectedTotal(const NodeStatus& s) {
  uint64_t n = 0;
  for (const auto& [reason, count] : s.rejected) n += count;
  return n;
}

namespace {

OrderedJson linkJson(const LinkStatus& l) {
  OrderedJson j;
  j["a_seconds"] = l.a_seconds;
  j["b_seconds_per_packet"] = l.b_seconds_per_packet;
  j["a_stderr"] = l.a_stderr;
  j["b_stderr"] = l.b_stderr;
  j["r2"] = l.r2;
  j["samples"] = l.samples;
  j["packet_bytes"] = l.packet_bytes;
  return j;
}

OrderedJson evaluationJson(const std::optional<EvaluationStatus>& e) {
  if (!e) return OrderedJson(nullptr);
  OrderedJson j;
  j["round"] = e->round;
  j["loss"] = e->loss;
  j["accuracy"] = e->accuracy;
  j["rows"] = e->rows;
  return j;
}

OrderedJson trainerJson(const TrainerStatus& t) {
  OrderedJson j;
  j["kind"] = t.kind;
  j["connected"] = t.connected;
  j["framework"] = t.framework;
  j["failures"] = t.failures;
  j["last_error"] = t.last_error;
  return j;
}

OrderedJson peerJson(const PeerStatus& w) {
  OrderedJson j;
  j["id"] = w.id;
  j["name"] = w.name;
  j["alive"] = w.alive;
  j["cap"] = w.cap;
  j["share"] = w.share;
  j["level"] = w.level;
  j["predicted_cost"] = w.predicted_cost;
  j["predicted_improvement"] = w.predicted_improvement;
  j["predicted_step"] = w.predicted_step;
  j["upload_bytes"] = w.upload_bytes;
  j["download_bytes"] = w.download_bytes;
  j["link"] = linkJson(w.link);
  j["benched"] = w.benched;
  j["pushes_clipped"] = w.pushes_clipped;
  j["evaluation"] = evaluationJson(w.evaluation);
  return j;
}

}  // namespace

std::string toJson(const NodeStatus& s) {
  OrderedJson j;
  j["role"] = s.role;
  j["name"] = s.name;
  j["version"] = s.version;
  j["state"] = s.state;
  j["round"] = s.round;
  j["rounds_completed"] = s.rounds_completed;
  j["time_s"] = s.time_s;
  j["round_deadline_seconds"] = s.round_deadline_seconds;
  j["train_loss"] = s.train_loss;
  j["test_accuracy"] = s.test_accuracy ? OrderedJson(*s.test_accuracy) : OrderedJson(nullptr);
  j["upload_bytes"] = s.upload_bytes;
  j["download_bytes"] = s.download_bytes;
  j["full_bytes"] = s.full_bytes;
  j["participants"] = s.participants;
  j["alive_workers"] = s.alive_workers;
  j["late_pushes"] = s.late_pushes;
  j["rejected_total"] = rejectedTotal(s);
  j["rejected"] = OrderedJson::object();
  for (const auto& [reason, n] : s.rejected) j["rejected"][reason] = n;
  j["counters"] = OrderedJson::object();
  for (const auto& [name, c] : s.counters) j["counters"][name] = c.value;
  j["workers"] = OrderedJson::array();
  for (const auto& w : s.workers) j["workers"].push_back(peerJson(w));
  if (s.role == "coordinator") j["federated"] = evaluationJson(s.federated);
  if (s.trainer) j["trainer"] = trainerJson(*s.trainer);
  return dumpJson(j);
}

}  // namespace tern::telemetry
