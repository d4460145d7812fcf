#pragma once
// What a daemon reports about itself and the cluster it sees, in one plain struct: the event loop
// fills it after each round or event, and it becomes the /status JSON document and the /metrics
// families. The coordinator lists every worker it knows; a worker lists itself. Byte and message
// counters are cumulative since the daemon started, like the metrics CSV.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tern::telemetry {

struct LinkStatus {
  double a_seconds = 0.0;             // fitted fixed cost per transfer
  double b_seconds_per_packet = 0.0;  // fitted cost per packet
  double r2 = 0.0;
  uint64_t samples = 0;
  uint32_t packet_bytes = 0;
  double a_stderr = 0.0;  // standard errors of a and b
  double b_stderr = 0.0;
};

// A model's quality on held-out rows: a worker's own evaluation, or the row-weighted mean of the
// workers' (federated evaluation, docs/python.md) of the model `round` started from.
struct EvaluationStatus {
  uint64_t round = 0;
  double loss = 0.0;
  double accuracy = 0.0;
  uint64_t rows = 0;
};

// A worker's trainer: built-in or external, and how it fared.
struct TrainerStatus {
  std::string kind;       // builtin | external
  bool connected = true;  // external: a trainer process is connected
  std::string framework;  // external: what its Hello said
  uint64_t failures = 0;  // rounds sat out because it failed
  std::string last_error;
};

struct PeerStatus {
  uint32_t id = 0;
  std::string name;
  bool alive = false;
  uint32_t cap = 0;    // coordinator's cap k_i (worker: the level it last sent)
  double share = 0.0;  // data share p_i
  // The tuner's report with the last push: the level T sent, its predicted cost C(T) (in the
  // cost model's unit), predicted improvement and the step that assumes (coordinator: zero for a
  // worker that did not push in the last round).
  uint32_t level = 0;
  double predicted_cost = 0.0;
  double predicted_improvement = 0.0;
  double predicted_step = 0.0;
  uint64_t upload_bytes = 0;
  uint64_t download_bytes = 0;
  LinkStatus link;
  bool benched = false;         // coordinator: a straggler not waited for
  uint64_t pushes_clipped = 0;  // coordinator: its pushes clipped to the round's norm bound
  std::optional<EvaluationStatus> evaluation;  // the last evaluation it reported
};

// A further cumulative counter: /metrics shows it as tern_NAME_total with `help` as its HELP text.
struct CounterStatus {
  uint64_t value = 0;
  std::string help;  // what it counts, one sentence
};

struct NodeStatus {
  std::string role;  // "coordinator" | "worker"
  std::string name;
  std::string version;
  std::string state;   // "waiting" | "running" | "finished" | "stopping"
  uint64_t round = 0;  // last closed round (coordinator) or replica round (worker)
  uint64_t rounds_completed = 0;
  double time_s = 0.0;                  // seconds since training started
  double round_deadline_seconds = 0.0;  // the coordinator's round deadline; 0 where not known
  double train_loss = 0.0;
  std::optional<double> test_accuracy;  // none where nothing is evaluated (a worker)
  uint64_t upload_bytes = 0;
  uint64_t download_bytes = 0;
  uint64_t full_bytes = 0;  // what uncompressed fp32 gradients would have cost
  uint32_t participants = 0;
  uint32_t alive_workers = 0;
  uint64_t late_pushes = 0;
  std::map<std::string, uint64_t> rejected;       // messages refused, by reason
  std::map<std::string, CounterStatus> counters;  // further cumulative counters, e.g. probe_bytes
  std::vector<PeerStatus> workers;
  std::optional<EvaluationStatus> federated;  // coordinator: the last federated evaluation
  std::optional<TrainerStatus> trainer;       // worker
};

uint64_t rejectedTotal(const NodeStatus& s);
// The /status document: the struct's fields under the same names.
std::string toJson(const NodeStatus& s);

}  // namespace tern::telemetry
