#include "common/telemetry/node_status.hpp"

#include "common/telemetry/json.hpp"

namespace tern::telemetry {

uint64_t rejectedTotal(const NodeStatus& s) {
  uint64_t n = 0;
  for (const auto& [reason, count] : s.rejected) n += count;
  return n;
}

std::string toJson(const NodeStatus& s) {
  JsonWriter j;
  j.beginObject();
  j.key("role").value(s.role);
  j.key("name").value(s.name);
  j.key("version").value(s.version);
  j.key("state").value(s.state);
  j.key("round").value(s.round);
  j.key("rounds_completed").value(s.rounds_completed);
  j.key("time_s").value(s.time_s);
  j.key("train_loss").value(s.train_loss);
  if (s.test_accuracy) {
    j.key("test_accuracy").value(*s.test_accuracy);
  } else {
    j.key("test_accuracy").null();
  }
  j.key("upload_bytes").value(s.upload_bytes);
  j.key("download_bytes").value(s.download_bytes);
  j.key("full_bytes").value(s.full_bytes);
  j.key("participants").value(s.participants);
  j.key("alive_workers").value(s.alive_workers);
  j.key("late_pushes").value(s.late_pushes);
  j.key("rejected_total").value(rejectedTotal(s));
  j.key("rejected").beginObject();
  for (const auto& [reason, n] : s.rejected) j.key(reason).value(n);
  j.endObject();
  j.key("counters").beginObject();
  for (const auto& [name, n] : s.counters) j.key(name).value(n);
  j.endObject();
  j.key("workers").beginArray();
  for (const auto& w : s.workers) {
    j.beginObject();
    j.key("id").value(w.id);
    j.key("name").value(w.name);
    j.key("alive").value(w.alive);
    j.key("cap").value(w.cap);
    j.key("share").value(w.share);
    j.key("level").value(w.level);
    j.key("predicted_cost").value(w.predicted_cost);
    j.key("predicted_improvement").value(w.predicted_improvement);
    j.key("predicted_step").value(w.predicted_step);
    j.key("upload_bytes").value(w.upload_bytes);
    j.key("download_bytes").value(w.download_bytes);
    j.key("link").beginObject();
    j.key("a_seconds").value(w.link.a_seconds);
    j.key("b_seconds_per_packet").value(w.link.b_seconds_per_packet);
    j.key("a_stderr").value(w.link.a_stderr);
    j.key("b_stderr").value(w.link.b_stderr);
    j.key("r2").value(w.link.r2);
    j.key("samples").value(w.link.samples);
    j.key("packet_bytes").value(w.link.packet_bytes);
    j.endObject();
    j.endObject();
  }
  j.endArray();
  j.endObject();
  return j.str();
}

}  // namespace tern::telemetry
