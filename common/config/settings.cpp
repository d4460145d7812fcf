#include "common/config/settings.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/allocation/budget_rules.hpp"
#include "common/config/data_source_reader.hpp"
#include "common/config/worker_data_reader.hpp"
#include "common/config/yaml_reader.hpp"
#include "common/costmodel/link_estimator.hpp"
#include "common/util/bind_address.hpp"

namespace tern::config {

const char* stepRuleName(StepRule rule) {
  switch (rule) {
    case StepRule::kCoordinator:
      return "coordinator";
    case StepRule::kPaper:
      return "paper";
    case StepRule::kAuto:
      break;
  }
  return "auto";
}

std::string endpointProblem(const std::string& v, bool bind) {
  const std::string form = "must be tcp://HOST:PORT or ipc://PATH, got '" + v + "': ";
  if (v.rfind("ipc://", 0) == 0) return v.size() == 6 ? form + "no path" : "";
  if (v.rfind("tcp://", 0) != 0) return form + "no tcp:// or ipc:// in front";
  const std::string rest = v.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return form + "no HOST:PORT after tcp://";
  const std::string port = rest.substr(colon + 1);
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!(digits && std::stoul(port) <= 65535) && !(bind && port == "*")) {
    return form + "the port must be a number from 0 to 65535" + (bind ? " or *" : "");
  }
  if (!bind && std::stoul(port) == 0) return form + "a worker connects to a port, not 0";
  return "";
}

std::string httpBindProblem(const std::string& address) {
  BindAddress parsed;
  const std::string why = bindAddressProblem(address, parsed);
  if (why.empty()) return "";
  return "must be HOST:PORT, [IPV6]:PORT or :PORT (PORT 0 for any free port), got '" + address +
         "': " + why;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void checkEndpoint(MapReader& m, const std::string& key, const std::string& v, bool bind) {
  if (std::string why = endpointProblem(v, bind); !why.empty()) m.fail(key, "'" + key + "' " + why);
}

void readLogging(MapReader m, LoggingSettings& s) {
  s.level = m.oneOf("level", m.get<std::string>("level", s.level),
                    {"trace", "debug", "info", "warn", "error", "off"});
  s.json = m.oneOf("format", m.get<std::string>("format", s.json ? "json" : "text"),
                   {"text", "json"}) == "json";
  m.done();
}

void readModel(MapReader m, ml::ModelSpec& s, std::string& file) {
  s.kind = m.oneOf("kind", m.get<std::string>("kind", s.kind),
                   {"softmax", "logistic", "mlp", "external"});
  if (s.kind == "external") {
    for (const std::string key : {"features", "classes", "hidden", "l2"}) {
      if (m.has(key)) m.fail(key, "'model." + key + "' is not read by kind external");
    }
    file = m.require<std::string>("file");
    if (file.empty()) m.fail("file", "'model.file' is empty");
    m.done();
    return;
  }
  if (m.has("file")) m.fail("file", "'model.file' needs 'kind: external'");
  s.features =
      m.inRange<uint32_t>("features", m.get<uint32_t>("features", s.features), 0, ml::kMaxFeatures);
  s.classes =
      m.inRange<uint32_t>("classes", m.get<uint32_t>("classes", s.classes), 2, ml::kMaxClasses);
  if (s.kind != "mlp" && m.has("hidden")) {
    m.fail("hidden", "'model.hidden' is read by kind mlp only, not by " + s.kind);
  }
  s.hidden = m.inRange<uint32_t>("hidden", m.get<uint32_t>("hidden", s.hidden), 1, ml::kMaxHidden);
  s.l2 = m.inRange("l2", m.get<double>("l2", s.l2), 0.0, 1e6);
  // Features inferred from the data (0) are checked once known, by the model's constructor.
  if (const uint64_t n = ml::paramsOf(s); s.features > 0 && n > ml::kMaxParams) {
    const std::string key = m.has("classes") ? "classes" : "features";
    m.fail(key, "'model." + key + "': a " + s.kind + " model of " + std::to_string(n) +
                    " parameters, more than the " + std::to_string(ml::kMaxParams) +
                    " tern trains");
  }
  m.done();
}

void readOptimizer(MapReader m, ml::OptimizerSpec& s) {
  s.lr = m.inRange("lr", m.get<double>("lr", s.lr), 1e-12, 1e6);
  s.momentum = m.inRange("momentum", m.get<double>("momentum", s.momentum), 0.0, 0.9999);
  s.decay = m.inRange("decay", m.get<double>("decay", s.decay), 1e-6, 1.0);
  s.decay_every = m.get<uint64_t>("decay_every", s.decay_every);
  m.done();
}

void readTraining(MapReader m, TrainingSettings& s) {
  s.batch_size =
      m.inRange<uint32_t>("batch_size", m.get<uint32_t>("batch_size", s.batch_size), 1, 1u << 24);
  s.local_steps = m.inRange<uint32_t>("local_steps", m.get<uint32_t>("local_steps", s.local_steps),
                                      1, kMaxLocalSteps);
  s.local_lr = m.inRange("local_lr", m.get<double>("local_lr", s.local_lr), 1e-12, 1e6);
  s.seed = m.get<uint64_t>("seed", s.seed);
  m.done();
}

void readAllocation(MapReader m, AllocationSettings& s) {
  const std::string method =
      m.oneOf("method", m.get<std::string>("method", allocation::methodName(s.method)),
              {"uniform", "dagc-r", "dagc-a", "dagc-opt", "cost-aware"});
  s.method = *allocation::methodNamed(method);
  auto& b = s.budget;
  b.mean_ratio = m.inRange("mean_ratio", m.get<double>("mean_ratio", b.mean_ratio), 1e-9, 1.0);
  b.bytes_per_round =
      m.inRange("bytes_per_round", m.get<double>("bytes_per_round", b.bytes_per_round), 0.0, kInf);
  b.seconds_per_round = m.inRange(
      "seconds_per_round", m.get<double>("seconds_per_round", b.seconds_per_round), 0.0, kInf);
  b.mean_threshold =
      m.inRange("mean_threshold", m.get<double>("mean_threshold", b.mean_threshold), 0.0, kInf);
  b.deadline_seconds = m.inRange("deadline_seconds",
                                 m.get<double>("deadline_seconds", b.deadline_seconds), 0.0, kInf);
  b.round_overhead_seconds =
      m.inRange("round_overhead_seconds",
                m.get<double>("round_overhead_seconds", b.round_overhead_seconds), 0.0, 86400.0);
  b.whole_packets = m.get<bool>("whole_packets", b.whole_packets);
  // Absent: the coordinator measures what its workers' pushes cost (the default until the
  // first pushes arrive); given: that price, and no fixed bytes per push.
  s.measure_push_bytes = !m.has("bytes_per_coordinate");
  b.bytes_per_coordinate =
      m.inRange("bytes_per_coordinate",
                m.get<double>("bytes_per_coordinate", b.bytes_per_coordinate), 0.125, 64.0);
  const auto key = [](const std::string& field) { return "'allocation." + field + "'"; };
  if (auto fault = allocation::budgetFault(s.method, b, key)) {
    m.fail(m.has(fault->field) ? fault->field : "method", fault->why);
  }
  s.reallocate_every = m.get<uint64_t>("reallocate_every", s.reallocate_every);
  m.done();
}

// The coordinator's own keys: where it listens, how many workers, rounds and timings.
void readCoordinatorLimits(MapReader& m, CoordinatorSettings& s) {
  s.bind = m.get<std::string>("bind", s.bind);
  if (m.has("bind")) checkEndpoint(m, "bind", s.bind, true);
  s.endpoint_file = m.get<std::string>("endpoint_file", s.endpoint_file);
  s.min_workers = m.inRange<uint32_t>("min_workers", m.get<uint32_t>("min_workers", s.min_workers),
                                      1, kMaxWorkers);
  s.max_workers = m.inRange<uint32_t>("max_workers", m.get<uint32_t>("max_workers", s.max_workers),
                                      1, kMaxWorkers);
  s.max_workers_given = m.has("max_workers");
  if (!s.max_workers_given) s.max_workers = std::max(s.max_workers, s.min_workers);
  if (s.min_workers > s.max_workers) {
    m.fail(s.max_workers_given ? "max_workers" : "min_workers",
           "min_workers (" + std::to_string(s.min_workers) + ") is more than max_workers (" +
               std::to_string(s.max_workers) + ")");
  }
  s.max_rounds =
      m.inRange<uint64_t>("max_rounds", m.get<uint64_t>("max_rounds", s.max_rounds), 1, kMaxRounds);
  s.target_accuracy =
      m.inRange("target_accuracy", m.get<double>("target_accuracy", s.target_accuracy), 0.0, 1.0);
  s.round_deadline_seconds =
      m.inRange("round_deadline_seconds",
                m.get<double>("round_deadline_seconds", s.round_deadline_seconds), 1e-3, 86400.0);
  s.quorum_share =
      m.inRange("quorum_share", m.get<double>("quorum_share", s.quorum_share), 0.0, 1.0);
  s.heartbeat_seconds = m.inRange(
      "heartbeat_seconds", m.get<double>("heartbeat_seconds", s.heartbeat_seconds), 1e-3, 3600.0);
  // At least 0.1 s: a worker heartbeats at most every 0.01 s, and three heartbeats must fit in
  // the patience with room for a loaded machine's scheduling (below it rounds never closed).
  s.worker_patience_seconds =
      m.inRange("worker_patience_seconds",
                m.get<double>("worker_patience_seconds", s.worker_patience_seconds), 0.1, 86400.0);
  s.eval_every =
      m.inRange<uint64_t>("eval_every", m.get<uint64_t>("eval_every", s.eval_every), 1, 1ull << 40);
}

void readAggregation(MapReader m, AggregationSettings& s) {
  if (m.has("max_worker_share") && m.get<std::string>("max_worker_share", "") != "auto") {
    s.max_worker_share =
        m.inRangeAbove("max_worker_share", m.get<double>("max_worker_share", 1.0), 0.0, 1.0);
  }
  const std::string robust =
      m.oneOf("robust", m.get<std::string>("robust", "none"), {"none", "trimmed_mean", "median"});
  s.robust = robust == "median"         ? RobustRule::kMedian
             : robust == "trimmed_mean" ? RobustRule::kTrimmedMean
                                        : RobustRule::kNone;
  // A fleet that does not trust every member clips tighter by default.
  const double clip = s.robust == RobustRule::kNone ? s.clip_multiple : kRobustClipMultiple;
  s.clip_multiple = m.inRange("clip_multiple", m.get<double>("clip_multiple", clip), 0.0, 1e12);
  if (s.clip_multiple > 0.0 && s.clip_multiple < 1.0) {
    m.fail("clip_multiple",
           "'clip_multiple' must be 0 (off) or at least 1: the median push "
           "itself would be clipped");
  }
  if (s.robust != RobustRule::kTrimmedMean && m.has("trim_fraction")) {
    m.fail("trim_fraction", "'aggregation.trim_fraction' is read with robust: trimmed_mean only");
  }
  s.trim_fraction =
      m.inRange("trim_fraction", m.get<double>("trim_fraction", s.trim_fraction), 0.0, 0.49);
  m.done();
}

// download: {ratio: auto | (0, 1]}
void readDownload(MapReader m, AggregationSettings& s) {
  if (m.has("ratio") && m.get<std::string>("ratio", "") != "auto") {
    s.download_ratio = m.inRangeAbove("ratio", m.get<double>("ratio", 1.0), 0.0, 1.0);
  }
  m.done();
}

void readStragglers(MapReader m, StragglerSettings& s) {
  s.bench_after_misses =
      m.inRange<uint32_t>("bench_after_misses",
                          m.get<uint32_t>("bench_after_misses", s.bench_after_misses), 0, 1u << 20);
  s.probe_every = m.inRange<uint32_t>("probe_every", m.get<uint32_t>("probe_every", s.probe_every),
                                      1, 1u << 20);
  m.done();
}

void readJoinRate(MapReader m, JoinRateSettings& r) {
  r.rate = m.inRange("rate", m.get<double>("rate", r.rate), 1e-6, 1e6);
  r.burst = m.inRange("burst", m.get<double>("burst", r.burst), 1.0, 1e6);
  m.done();
}

// joins: {per_connection: {rate, burst}, per_key: {rate, burst}, pending_seconds}
void readJoins(MapReader m, JoinSettings& j) {
  if (m.has("per_connection")) readJoinRate(m.child("per_connection"), j.per_connection);
  if (m.has("per_key")) readJoinRate(m.child("per_key"), j.per_key);
  j.pending_seconds = m.inRange("pending_seconds",
                                m.get<double>("pending_seconds", j.pending_seconds), 1e-3, 86400.0);
  m.done();
}

void readCoordinatorBody(MapReader& m, CoordinatorSettings& s) {
  readCoordinatorLimits(m, s);
  MapReader model = m.child("model");
  s.model_features_at = model.has("features") ? model.at("features")
                        : m.has("model")      ? m.at("model")
                                              : m.file() + ":1:1";
  readModel(model, s.model, s.model_file);
  readOptimizer(m.child("optimizer"), s.optimizer);
  readTraining(m.child("training"), s.training);
  readAllocation(m.child("allocation"), s.allocation);
  readAggregation(m.child("aggregation"), s.aggregation);
  readDownload(m.child("download"), s.aggregation);
  readStragglers(m.child("stragglers"), s.stragglers);
  if (m.has("test_data")) {
    MapReader d = m.child("test_data");
    readDataSource(d, s.test_data, ml::DataSource::Split::kTest);
    d.done();
  } else {
    s.test_data.format = "";
  }
  if (s.model.kind == "external" && !s.test_data.format.empty()) {
    m.fail("test_data",
           "'test_data' is evaluated with a built-in model; an external model is "
           "evaluated by its trainers (federated evaluation): leave 'test_data' out");
  }
  s.metrics_csv = m.get<std::string>("metrics_csv", s.metrics_csv);
  s.max_message_bytes_given =
      m.has("max_message_bytes") && m.get<std::string>("max_message_bytes", "") != "auto";
  if (s.max_message_bytes_given) {
    s.max_message_bytes = m.inRange<size_t>("max_message_bytes",
                                            m.get<size_t>("max_message_bytes", s.max_message_bytes),
                                            1024, 1ull << 32);
  }
  if (m.has("checkpoint")) {
    MapReader c = m.child("checkpoint");
    s.checkpoint.path = c.get<std::string>("path", s.checkpoint.path);
    s.checkpoint.every = c.get<uint64_t>("every", s.checkpoint.every);
    if (s.checkpoint.path.empty()) c.failHere("checkpoint needs 'path'");
    c.done();
  }
  if (m.has("joins")) readJoins(m.child("joins"), s.joins);
  readLogging(m.child("logging"), s.logging);
}

void readCompression(MapReader m, WorkerSettings& s) {
  s.compressor.name =
      m.oneOf("name", m.get<std::string>("name", s.compressor.name),
              {"identity", "fp16", "topk", "randomk", "threshold", "sq", "stochastic", "qsgd"});
  s.compressor.threshold =
      m.inRange("threshold", m.get<double>("threshold", s.compressor.threshold), 0.0, kInf);
  s.compressor.qsgd_levels = m.inRange<uint32_t>(
      "qsgd_levels", m.get<uint32_t>("qsgd_levels", s.compressor.qsgd_levels), 1, 1u << 15);
  if (m.has("error_feedback")) {
    const auto v = m.get<std::string>("error_feedback", "auto");
    if (v != "auto") {
      s.error_feedback = m.get<bool>("error_feedback", s.error_feedback);
      s.error_feedback_auto = false;
    }
  }
  m.done();
}

void readTuning(MapReader m, TuningSettings& s) {
  s.method = *tuning::tunerKindNamed(
      m.oneOf("method", m.get<std::string>("method", tuning::tunerKindName(s.method)),
              {"cat", "cat-paper", "fixed", "dynamic", "full"}));
  s.fixed_level = m.get<uint32_t>("fixed_level", s.fixed_level);
  s.recompute_every = m.inRange<uint32_t>(
      "recompute_every", m.get<uint32_t>("recompute_every", s.recompute_every), 1, 1u << 30);
  s.recompute_drift = m.get<double>("recompute_drift", s.recompute_drift);
  if (!(s.recompute_drift == 0.0 ||
        (s.recompute_drift > 1.0 && std::isfinite(s.recompute_drift)))) {
    m.fail("recompute_drift", "'recompute_drift' must be 0 (off) or a factor > 1, got " +
                                  formatNumber(s.recompute_drift));
  }
  const std::string step = m.oneOf("step", m.get<std::string>("step", stepRuleName(s.step)),
                                   {"auto", "coordinator", "paper"});
  s.step = step == "paper"         ? StepRule::kPaper
           : step == "coordinator" ? StepRule::kCoordinator
                                   : StepRule::kAuto;
  s.cost_model = *costmodel::costModelKindNamed(m.oneOf(
      "cost_model", m.get<std::string>("cost_model", costmodel::costModelKindName(s.cost_model)),
      {"payload", "packet", "measured"}));
  s.c_fixed = m.inRange("c_fixed", m.get<double>("c_fixed", s.c_fixed), 0.0, kInf);
  // A packet that costs nothing would make every level past the first free: the packet cost
  // model refuses it, so it is refused here, at its line.
  s.c_packet = m.inRangeAbove("c_packet", m.get<double>("c_packet", s.c_packet), 0.0, kInf);
  m.done();
}

void readLink(MapReader m, LinkSettings& s) {
  s.packet_bytes = m.inRange<uint32_t>("packet_bytes",
                                       m.get<uint32_t>("packet_bytes", s.packet_bytes), 64, 65536);
  s.calibration_packets = m.getVector<size_t>("calibration_packets", s.calibration_packets);
  if (s.calibration_packets.size() > costmodel::kMaxCalibrationSizes) {
    m.fail("calibration_packets", "'calibration_packets' has more than " +
                                      std::to_string(costmodel::kMaxCalibrationSizes) + " sizes");
  }
  for (size_t packets : s.calibration_packets) {
    if (packets == 0 || packets > costmodel::kMaxCalibrationPackets) {
      m.fail("calibration_packets", "'calibration_packets' sizes must be in [1, " +
                                        std::to_string(costmodel::kMaxCalibrationPackets) +
                                        "] packets, got " + std::to_string(packets));
    }
  }
  s.probe_repeats = m.inRange<uint32_t>("probe_repeats",
                                        m.get<uint32_t>("probe_repeats", s.probe_repeats), 0, 100);
  s.calibration_max_seconds =
      m.inRange("calibration_max_seconds",
                m.get<double>("calibration_max_seconds", s.calibration_max_seconds), 0.0, 3600.0);
  s.probe_bytes_per_minute = m.get<size_t>("probe_bytes_per_minute", s.probe_bytes_per_minute);
  s.probe_link_share = m.inRangeAbove(
      "probe_link_share", m.get<double>("probe_link_share", s.probe_link_share), 0.0, 1.0);
  s.measure = m.get<bool>("measure", s.measure);
  s.alternate_rounds = m.inRange<uint32_t>(
      "alternate_rounds", m.get<uint32_t>("alternate_rounds", s.alternate_rounds), 0, 1000000);
  m.done();
}

void readWorkerBody(MapReader& m, WorkerSettings& s, bool with_data) {
  s.name = m.get<std::string>("name", s.name);
  // The coordinator refuses every join under such a name: the worker would retry for ever.
  if (std::string why = workerNameProblem(s.name); !why.empty()) m.fail("name", "'name' " + why);
  s.coordinator = m.get<std::string>("coordinator", s.coordinator);
  if (m.has("coordinator")) checkEndpoint(m, "coordinator", s.coordinator, false);
  if (with_data) {
    readTrainer(m, s.trainer);
    readWorkerData(m, s);
  }
  readCompression(m.child("compression"), s);
  readTuning(m.child("tuning"), s.tuning);
  readLink(m.child("link"), s.link);
  s.heartbeat_seconds = m.inRange(
      "heartbeat_seconds", m.get<double>("heartbeat_seconds", s.heartbeat_seconds), 1e-3, 3600.0);
  s.coordinator_patience_seconds = m.inRange(
      "coordinator_patience_seconds",
      m.get<double>("coordinator_patience_seconds", s.coordinator_patience_seconds), 1e-3, 86400.0);
  s.max_message_bytes =
      m.inRange<size_t>("max_message_bytes",
                        m.get<size_t>("max_message_bytes", s.max_message_bytes), 1024, 1ull << 32);
  readLogging(m.child("logging"), s.logging);
}

enum class Role { coordinator, worker };

// `security: none`, or a mapping {mode: none|curve, secret_key_file, and the coordinator's
// allowlist or the worker's server_public_key_file}. Absent: see requireSecurity.
void readSecurity(MapReader& parent, SecuritySettings& s, Role role) {
  if (!parent.has("security")) return;
  if (!parent.hasMap("security")) {
    const auto v = parent.get<std::string>("security", "");
    if (v != "none") {
      parent.fail("security", "'security' must be 'none' or a mapping with 'mode: curve', got '" +
                                  v + "' (see docs/security.md)");
    }
    s.mode = "none";
    return;
  }
  MapReader m = parent.child("security");
  s.mode = m.oneOf("mode", m.require<std::string>("mode"), {"none", "curve"});
  const std::string peer_key = role == Role::coordinator ? "allowlist" : "server_public_key_file";
  std::string& peer_value = role == Role::coordinator ? s.allowlist : s.server_public_key_file;
  if (!s.curve()) {
    for (const std::string key : {"secret_key_file", peer_key.c_str()}) {
      if (m.has(key)) m.fail(key, "'security." + key + "' needs 'mode: curve'");
    }
  } else {
    s.secret_key_file = m.require<std::string>("secret_key_file");
    peer_value = m.require<std::string>(peer_key);
    for (const std::string key : {"secret_key_file", peer_key.c_str()}) {
      if (m.get<std::string>(key, "").empty()) m.fail(key, "'security." + key + "' is empty");
    }
  }
  m.done();
}

// `http: {bind: HOST:PORT, url_file: PATH, stale_after_seconds: S}` (daemons only).
void readHttp(MapReader& parent, HttpSettings& s) {
  if (!parent.has("http")) return;
  MapReader m = parent.child("http");
  s.bind = m.require<std::string>("bind");
  if (std::string why = httpBindProblem(s.bind); !why.empty()) m.fail("bind", "'http.bind' " + why);
  s.url_file = m.get<std::string>("url_file", s.url_file);
  s.stale_after_seconds =
      m.inRange("stale_after_seconds", m.get<double>("stale_after_seconds", s.stale_after_seconds),
                0.1, 86400.0);
  m.done();
}

// Plaintext must be a choice, never an accident of a forgotten section.
void requireSecurity(const MapReader& m) {
  if (m.has("security")) return;
  m.failHere(
      "missing 'security': write 'security: none' to run without encryption or authentication "
      "(anyone who reaches the port can join and read the traffic), or "
      "'security: {mode: curve, ...}' with key files (see docs/security.md)");
}

}  // namespace

namespace {

// The top-level keys of each daemon's file: what the environment may set.
const std::set<std::string> kCoordinatorKeys = {"bind",
                                                "endpoint_file",
                                                "min_workers",
                                                "max_workers",
                                                "max_rounds",
                                                "target_accuracy",
                                                "round_deadline_seconds",
                                                "quorum_share",
                                                "heartbeat_seconds",
                                                "worker_patience_seconds",
                                                "eval_every",
                                                "model",
                                                "optimizer",
                                                "training",
                                                "allocation",
                                                "aggregation",
                                                "download",
                                                "stragglers",
                                                "test_data",
                                                "metrics_csv",
                                                "max_message_bytes",
                                                "checkpoint",
                                                "logging",
                                                "security",
                                                "joins",
                                                "http"};
const std::set<std::string> kWorkerKeys = {"name",
                                           "coordinator",
                                           "data",
                                           "trainer",
                                           "shard",
                                           "partition",
                                           "compression",
                                           "tuning",
                                           "link",
                                           "heartbeat_seconds",
                                           "coordinator_patience_seconds",
                                           "max_message_bytes",
                                           "logging",
                                           "security",
                                           "http"};

// The file's tree with the environment's overrides, read by a MapReader that says where each
// value came from.
MapReader readWithEnvironment(const std::string& file, const std::set<std::string>& keys,
                              const Environment& env) {
  YAML::Node root = loadYamlFile(file);
  auto origins = std::make_shared<const Origins>(applyEnvironment(root, keys, env));
  return MapReader(root, file, "", origins);
}

}  // namespace

CoordinatorSettings loadCoordinatorSettings(const std::string& file) {
  return loadCoordinatorSettings(file, ternEnvironment());
}

CoordinatorSettings loadCoordinatorSettings(const std::string& file, const Environment& env) {
  MapReader m = readWithEnvironment(file, kCoordinatorKeys, env);
  CoordinatorSettings s;
  readCoordinatorBody(m, s);
  readSecurity(m, s.security, Role::coordinator);
  readHttp(m, s.http);
  m.done();
  requireSecurity(m);
  return s;
}

void requireModelFeatures(const CoordinatorSettings& s) {
  if (s.model.kind == "external" || s.model.features > 0 || !s.test_data.format.empty()) return;
  throw ConfigError(s.model_features_at +
                    ": 'model.features' must be set (> 0): there is no 'test_data' to take the "
                    "model's input width from");
}

WorkerSettings loadWorkerSettings(const std::string& file) {
  return loadWorkerSettings(file, ternEnvironment());
}

WorkerSettings loadWorkerSettings(const std::string& file, const Environment& env) {
  MapReader m = readWithEnvironment(file, kWorkerKeys, env);
  WorkerSettings s;
  readWorkerBody(m, s, true);
  readSecurity(m, s.security, Role::worker);
  readHttp(m, s.http);
  m.done();
  requireSecurity(m);
  return s;
}

SimSettings loadSimSettings(const std::string& file) {
  MapReader m(loadYamlFile(file), file);
  SimSettings s;
  s.workers = m.inRange<uint32_t>("workers", m.get<uint32_t>("workers", s.workers), 1, kMaxWorkers);
  MapReader c = m.child("coordinator");
  // Keys only a daemon uses would be read and silently ignored: refused at their line instead.
  for (const std::string key :
       {"bind", "endpoint_file", "min_workers", "max_workers", "metrics_csv", "checkpoint"}) {
    if (c.has(key)) {
      c.fail(key, "'coordinator." + key + "' is for tern-coordinator's own file; tern-sim does " +
                      "not use it" +
                      (key == "metrics_csv" ? " (its CSV is the top-level 'metrics_csv')" : ""));
    }
  }
  readCoordinatorBody(c, s.coordinator);
  if (s.coordinator.target_accuracy > 0.0 && s.coordinator.test_data.format.empty()) {
    c.fail("target_accuracy",
           "'target_accuracy' is checked at evaluations of 'test_data', and there is none: set "
           "'test_data' or leave 'target_accuracy' out");
  }
  if (s.coordinator.model.kind == "external") {
    c.child("model").fail("kind",
                          "tern-sim trains the built-in models (softmax, logistic, mlp); "
                          "an external model trains with tern-worker (docs/python.md)");
  }
  c.done();
  MapReader w = m.child("worker");
  for (const std::string key : {"name", "coordinator"}) {
    if (w.has(key)) {
      w.fail(key, "'worker." + key + "' is for tern-worker's own file; tern-sim names and " +
                      "connects its workers itself");
    }
  }
  readWorkerBody(w, s.worker, false);
  MapReader part = w.child("partition");
  readPartition(part, s.worker.partition);
  w.done();
  MapReader d = m.child("train_data");
  readDataSource(d, s.train_data, ml::DataSource::Split::kTrain);
  d.done();
  for (auto& l : m.list("links")) {
    SimLink link;
    link.rate_mbps = l.inRange("rate_mbps", l.get<double>("rate_mbps", link.rate_mbps), 1e-6, 1e6);
    link.latency_ms =
        l.inRange("latency_ms", l.get<double>("latency_ms", link.latency_ms), 0.0, 1e6);
    link.compute_seconds = l.inRange(
        "compute_seconds", l.get<double>("compute_seconds", link.compute_seconds), 0.0, 1e6);
    if (l.has("download_rate_mbps")) {
      link.download_rate_mbps =
          l.inRange("download_rate_mbps", l.require<double>("download_rate_mbps"), 1e-6, 1e6);
    }
    link.burst_bytes =
        l.inRange("burst_bytes", l.get<double>("burst_bytes", link.burst_bytes), 0.0, 1e9);
    l.done();
    s.links.push_back(link);
  }
  if (s.links.empty()) s.links.push_back(SimLink{});
  s.download_rate_mbps = m.inRange(
      "download_rate_mbps", m.get<double>("download_rate_mbps", s.download_rate_mbps), 1e-6, 1e6);
  s.evaluation_seconds = m.inRange(
      "evaluation_seconds", m.get<double>("evaluation_seconds", s.evaluation_seconds), 0.0, 3600.0);
  s.metrics_csv = m.get<std::string>("metrics_csv", s.metrics_csv);
  MapReader byz = m.child("byzantine");
  s.byzantine.workers =
      byz.inRange<uint32_t>("workers", byz.get<uint32_t>("workers", 0), 0, s.workers);
  s.byzantine.scale =
      byz.inRange("scale", byz.get<double>("scale", s.byzantine.scale), -1e30, 1e30);
  s.byzantine.samples =
      byz.inRange<uint64_t>("samples", byz.get<uint64_t>("samples", 0), 0, uint64_t{1} << 40);
  byz.done();
  setSimWorkers(s, s.workers);
  m.done();
  return s;
}

void setSimWorkers(SimSettings& s, uint32_t workers) {
  s.workers = workers;
  s.coordinator.min_workers = workers;
  s.coordinator.max_workers = std::max(s.coordinator.max_workers, workers);
}

}  // namespace tern::config
