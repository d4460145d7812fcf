#pragma once
// Validated configuration of the coordinator, the worker and the simulator, parsed once from
// YAML and passed by const& from then on. Parsing errors name file:line:column.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/allocation/allocator.hpp"
#include "common/compression/compressor.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/ml/data_source.hpp"
#include "common/ml/model.hpp"
#include "common/ml/optimizer.hpp"
#include "common/tuning/tuner_kind.hpp"
#include "common/util/printable.hpp"

namespace tern::config {

struct LoggingSettings {
  std::string level = "info";
  bool json = false;  // format: json (one object per line) rather than text
};

// The daemon's HTTP endpoint (/metrics, /status, /healthz). Empty bind: none.
struct HttpSettings {
  std::string bind;                   // "HOST:PORT" (port 0: any free port)
  std::string url_file;               // written with "http://HOST:PORT" once bound
  double stale_after_seconds = 30.0;  // /healthz answers 503 when the loop is silent this long
};

// The most local SGD steps a round may ask of a worker (configuration and wire alike).
inline constexpr uint32_t kMaxLocalSteps = 10000;

// Ranges a configuration key and the flag that overrides it share: the most workers (min_workers,
// data.shard.total and tern-sim's workers) and the most rounds (max_rounds).
inline constexpr uint32_t kMaxWorkers = 100000;
inline constexpr uint64_t kMaxRounds = uint64_t{1} << 40;

// The longest worker name (bytes) the coordinator admits in a join, and so the longest a worker's
// configuration may give.
inline constexpr size_t kMaxWorkerNameBytes = 256;

struct TrainingSettings {
  uint32_t batch_size = 64;
  uint32_t local_steps = 1;  // >1: the worker sends the delta of local SGD steps as its gradient
  double local_lr = 0.1;     // step of the local SGD steps
  uint64_t seed = 1;
};

struct AllocationSettings {
  allocation::Method method = allocation::Method::kCostAware;  // methodName() spells it
  allocation::Budget budget;
  // Re-plan every this many rounds (0 = never on a schedule). Membership changes re-plan at
  // once; changed plan inputs (a link model or the measured push bytes) at the round's close.
  uint64_t reallocate_every = 0;
  // Price pushes by what the workers' pushes measurably cost on the wire (bytes_per_push +
  // bytes_per_coordinate * k, re-measured as pushes arrive, each worker's from its own pushes)
  // rather than by the configured bytes_per_coordinate for everyone.
  bool measure_push_bytes = true;
};

// Robustness: how a round's pushes are weighed and bounded when not every member is trusted
// (docs/security.md, "Poisoned pushes"), and when a member that misses its pushes stops holding
// rounds up (docs/reliability.md, "Stragglers").
enum class RobustRule { kNone, kTrimmedMean, kMedian };
inline constexpr double kRobustClipMultiple = 2.0;
struct AggregationSettings {
  // The largest weight one pusher gets; 0 = auto: max(0.5, 2/n) over the round's n pushers.
  double max_worker_share = 0.0;
  // A push's norm at most this times the round's median (0 = off); kRobustClipMultiple by default
  // under a robust rule.
  double clip_multiple = 10.0;
  RobustRule robust = RobustRule::kNone;
  double trim_fraction = 0.2;  // trimmed_mean: the share cut from each end, in [0, 0.5)
  // The broadcast update's kept coordinates as a share of the model (`download.ratio`); 0 = auto:
  // as many as the round's pushes carried together. What is not sent waits in the coordinator's
  // download residual (docs/downloads.md). 1 = every change, dense as the optimizer makes it.
  double download_ratio = 0.0;
};
struct StragglerSettings {
  uint32_t bench_after_misses = 3;  // rounds missed in a row that bench a member (0 = never)
  uint32_t probe_every = 10;        // a benched member is offered a round this often
};

// Where and how often the coordinator saves its state to resume after a restart. Empty path:
// no checkpoints (and SIGTERM ends training for every worker instead of pausing it).
struct CheckpointSettings {
  std::string path;
  uint64_t every = 10;  // rounds between checkpoints; 0 = only on SIGTERM and at the end
};

// CURVE encryption and authentication of the ZeroMQ connections. The daemons' configuration
// must choose: `security: none` (plaintext, warned about at start) or a `curve` mapping. The
// key files are read by the daemon at start (transport/curve_keys.hpp); here only their paths.
struct SecuritySettings {
  std::string mode = "none";           // none | curve
  std::string secret_key_file;         // this daemon's secret key (its public key is derived)
  std::string server_public_key_file;  // worker: the coordinator's public key
  std::string allowlist;               // coordinator: a file of worker keys or a directory of .pub
  bool curve() const { return mode == "curve"; }
};

// How fast joins may come, and how long a member that never pushed keeps its seat (`joins:`).
struct JoinRateSettings {
  double rate = 1.0;    // joins per second, refilled
  double burst = 10.0;  // joins at once
};
struct JoinSettings {
  JoinRateSettings per_connection{1.0, 10.0};  // per ROUTER identity (one TCP connection)
  JoinRateSettings per_key{2.0, 20.0};         // per CURVE public key (security: curve only)
  // A member that never pushed is forgotten this long after it went, and its seat taken by a
  // newcomer into a full table once it has held it this long (a member that pushed: never).
  double pending_seconds = 60.0;
};

struct CoordinatorSettings {
  std::string bind = "tcp://127.0.0.1:5555";
  std::string endpoint_file;  // where the bound endpoint is written (for port 0)
  uint32_t min_workers = 1;
  // Workers the coordinator keeps track of at once (alive, or gone but not yet forgotten): a join
  // under a new name beyond it is refused, so a flood of names cannot grow its tables and logs.
  uint32_t max_workers = 1000;  // at least min_workers when not given
  bool max_workers_given = false;
  uint64_t max_rounds = 100;
  double target_accuracy = 0.0;  // 0 = run max_rounds
  double round_deadline_seconds = 10.0;
  double quorum_share = 0.0;  // a round closes at the deadline only with this data share in
  double heartbeat_seconds = 1.0;
  double worker_patience_seconds = 10.0;
  uint64_t eval_every = 10;
  ml::ModelSpec model;
  std::string
      model_file;  // model.kind external: the layout and initial parameters (docs/python.md)
  // "file:line:column" of model.features, else of the model section, else the file's start: where
  // requireModelFeatures says that nothing gives the model its width.
  std::string model_features_at;
  ml::OptimizerSpec optimizer;
  TrainingSettings training;
  AllocationSettings allocation;
  AggregationSettings aggregation;
  StragglerSettings stragglers;
  ml::DataSource test_data;
  std::string metrics_csv;
  // The largest message part it takes. Not given (or `auto`): the daemon sets it from the model
  // at start (autoMaxMessageBytes), so that no peer can make it hold more than a push needs.
  size_t max_message_bytes = 64u << 20;
  bool max_message_bytes_given = false;
  CheckpointSettings checkpoint;
  SecuritySettings security;
  JoinSettings joins;
  HttpSettings http;
  LoggingSettings logging;
};

// What tuning.step prices levels at (TuningSettings::step).
enum class StepRule { kAuto, kCoordinator, kPaper };
// The configuration's word for a step rule ("auto", "coordinator", "paper").
const char* stepRuleName(StepRule rule);

struct TuningSettings {
  tuning::TunerKind method = tuning::TunerKind::kCat;  // cat | cat-paper | fixed | dynamic | full
  uint32_t fixed_level = 0;                            // 0 = use the coordinator's cap
  uint32_t recompute_every = 1;
  double recompute_drift = 1.25;  // cat hybrid: early recompute factor (0 = off), see TunerSpec
  // The step cat and the other tuners price levels at: the coordinator's learning rate as each
  // round start says it (the paper's step until one does), always the paper's (1/L), or auto:
  // the coordinator's where the model's smoothness bound L guarantees the round's own step a
  // decrease (lr L < 2; momentum's later reuse of the push is not counted), else the paper's (a
  // bound that loose says nothing about the coordinator's step). Pricing at the coordinator's
  // step deviates from the paper: docs/cat.md, "Deviations from the paper", says how.
  StepRule step = StepRule::kAuto;  // auto | coordinator | paper
  costmodel::CostModelKind cost_model =
      costmodel::CostModelKind::kMeasured;  // payload | packet | measured
  double c_fixed = 0.005;  // packet model constants (seconds) until a link fit exists
  double c_packet = 0.0015;
};

struct LinkSettings {
  uint32_t packet_bytes = 1448;
  std::vector<size_t> calibration_packets = {1, 4, 16, 64};
  uint32_t probe_repeats = 2;
  // A calibration probe the train's smaller probes say would take longer is skipped (0 = never).
  double calibration_max_seconds = 0.05;
  size_t probe_bytes_per_minute = 256 * 1024;
  double probe_link_share = 0.1;  // and at most this share of the fitted link's capacity
  bool measure = true;
  // Benchmark aid (bench/link_overhead): with measure on, measurement pauses on every other
  // block of this many rounds (rounds [N, 2N), [3N, 4N), ...): no timing, no estimator update,
  // no exploration probe, so one run holds rounds with and without it side by side. 0 = never.
  uint32_t alternate_rounds = 0;
};

// An external trainer's request timeout when neither its settings nor the welcome give one.
inline constexpr double kDefaultTrainerTimeoutSeconds = 60.0;

// Who computes the worker's gradients (docs/python.md): the built-in model over its data, or an
// external trainer process that connects to `endpoint` (where the worker binds for it).
struct TrainerSettings {
  std::string kind = "builtin";  // builtin | external
  std::string endpoint;          // external: ipc://PATH (or tcp://127.0.0.1:PORT)
  // external: a request unanswered this long fails its round; unset: 0.8 of the round deadline
  // the coordinator's welcome says (kDefaultTrainerTimeoutSeconds when it says none)
  std::optional<double> timeout_seconds;
  bool external() const { return kind == "external"; }
};

struct WorkerSettings {
  std::string name = "worker";
  std::string coordinator = "tcp://127.0.0.1:5555";
  ml::DataSource data;
  // shard: the worker cuts its shard (data.shard) from one data set every worker holds; local:
  // the data are this device's own rows, all of them its share (no partition check).
  std::string data_mode = "shard";
  ml::DataSource eval_data;  // data.eval: held-out rows for federated evaluation (format "" = none)
  size_t shard_index = 0;
  size_t shard_total = 1;
  ml::PartitionSpec partition;
  TrainerSettings trainer;
  compression::CompressorSpec compressor;
  // Error feedback: "auto" (the default) turns it on for the biased compressors (topk,
  // threshold, sq) and off for the unbiased ones (randomk, stochastic, qsgd), whose d/k-style
  // scaling makes the residual grow without bound; an explicit true/false overrides it.
  bool error_feedback = true;
  bool error_feedback_auto = true;
  TuningSettings tuning;
  LinkSettings link;
  double heartbeat_seconds = 1.0;
  double coordinator_patience_seconds = 15.0;
  size_t max_message_bytes = 64u << 20;
  SecuritySettings security;
  HttpSettings http;
  LoggingSettings logging;
};

struct SimLink {
  double rate_mbps = 100.0;  // the worker's uplink
  double latency_ms = 1.0;
  double compute_seconds = 0.01;
  std::optional<double> download_rate_mbps;  // the worker's downlink; none: SimSettings'
  // Each direction's token bucket (bytes sent at once after an idle spell, as tbf's burst); 0:
  // rate only.
  double burst_bytes = 0.0;
};

// Sim only: the first `workers` members poison their pushes (values times `scale`) and claim
// `samples` in their joins (0 = their shard's), to test the defences (docs/security.md).
struct SimByzantine {
  uint32_t workers = 0;
  double scale = 1e6;
  uint64_t samples = 0;
};

struct SimSettings {
  CoordinatorSettings coordinator;
  WorkerSettings worker;  // template: shard index/total and name are set per worker
  ml::DataSource train_data;
  uint32_t workers = 4;
  std::vector<SimLink> links;  // per worker; the last one repeats when shorter than `workers`
  double download_rate_mbps = 100.0;  // every link's downlink that does not set its own
  // Virtual seconds the coordinator is busy evaluating the test set (0: evaluations take none).
  double evaluation_seconds = 0.0;
  std::string metrics_csv;
  SimByzantine byzantine;
};

// The daemons' files where --config is not given.
inline constexpr const char* kDefaultCoordinatorConfig = "/etc/tern/coordinator.yaml";
inline constexpr const char* kDefaultWorkerConfig = "/etc/tern/worker.yaml";

// TERN_* variables by name. A daemon's file is read with the process's: TERN_<KEY>[__<KEY>...]
// overrides that key path of the file (docs/configuration.md, "Environment").
using Environment = std::map<std::string, std::string>;

CoordinatorSettings loadCoordinatorSettings(const std::string& file);
CoordinatorSettings loadCoordinatorSettings(const std::string& file, const Environment& env);
// Throws ConfigError at model_features_at when the coordinator daemon has no width for its model:
// no model.features and no test_data to take it from. (The simulator takes it from train_data.)
void requireModelFeatures(const CoordinatorSettings& s);
WorkerSettings loadWorkerSettings(const std::string& file);
WorkerSettings loadWorkerSettings(const std::string& file, const Environment& env);
SimSettings loadSimSettings(const std::string& file);
// Sets the simulated fleet's size and what follows from it: the coordinator waits for all of
// them (min_workers) and tracks at least that many (max_workers).
void setSimWorkers(SimSettings& s, uint32_t workers);

// A coordinator's max_message_bytes for a model of `params` parameters when none is given: the
// densest push a worker can send (a sparse code of every coordinate, 8 bytes each) and 64 KiB
// for the codec's header and link probes, at least 1 MiB (the largest envelope frame a message
// may have: a join's label histogram can take most of it). Each unauthenticated connection can
// make libzmq hold one such part while it arrives (docs/security.md).
inline size_t autoMaxMessageBytes(size_t params) {
  const uint64_t need = 8 * uint64_t(params) + (64u << 10);
  return size_t(std::clamp<uint64_t>(need, 1u << 20, uint64_t(1) << 32));
}

// "" when `name` can name a worker at the coordinator (1 to kMaxWorkerNameBytes bytes of UTF-8
// without control characters: it goes into the coordinator's logs, status and metrics labels);
// else why it cannot ("must not be empty", ...). Inline: the coordinator's core checks joins
// with it and links nothing of the configuration.
inline std::string workerNameProblem(const std::string& name) {
  if (name.empty()) return "must not be empty: it is the worker's identity at the coordinator";
  if (name.size() > kMaxWorkerNameBytes) {
    return "must be at most " + std::to_string(kMaxWorkerNameBytes) + " bytes, got " +
           std::to_string(name.size());
  }
  if (hasControlBytes(name)) {
    return "must be UTF-8 without control characters, got '" + printable(name) + "'";
  }
  return "";
}

// "" when `address` is an HTTP endpoint a daemon can bind: HOST:PORT, [IPV6]:PORT or :PORT (every
// IPv4 interface), PORT 0 for any free port; else why it is not.
std::string httpBindProblem(const std::string& address);

// "" when `endpoint` is a ZeroMQ endpoint a daemon can bind (bind = true) or connect to:
// tcp://HOST:PORT (HOST * and PORT 0 or * to bind only) or ipc://PATH; else why it is not.
std::string endpointProblem(const std::string& endpoint, bool bind);

}  // namespace tern::config
