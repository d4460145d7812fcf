#include "experiment.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/allocation/allocator.hpp"
#include "common/ml/model.hpp"

namespace tern::bench::dagc {

const std::vector<Method>& allMethods() {
  static const std::vector<Method> methods = {
      {"uniform", "uniform", "topk"},
      {"dagc-r", "dagc-r", "topk"},
      {"dagc-opt", "dagc-opt", "topk"},
      {"cost-aware", "cost-aware", "topk"},
      {"cost-aware-packets", "cost-aware", "topk"},
      {"uniform-ht", "uniform", "threshold"},
      {"dagc-a", "dagc-a", "threshold"},
  };
  return methods;
}

const Method& methodByLabel(const std::string& label) {
  for (const auto& m : allMethods()) {
    if (m.label == label) return m;
  }
  throw std::invalid_argument("unknown method '" + label + "'");
}

ml::DataSource DataFiles::train() const {
  ml::DataSource d;
  d.format = "idx";
  d.images = dir + "/train-images-idx3-ubyte.gz";
  d.labels = dir + "/train-labels-idx1-ubyte.gz";
  return d;
}

ml::DataSource DataFiles::test() const {
  ml::DataSource d;
  d.format = "idx";
  d.images = dir + "/t10k-images-idx3-ubyte.gz";
  d.labels = dir + "/t10k-labels-idx1-ubyte.gz";
  return d;
}

config::SimSettings simSettings(const RunSpec& run, const Training& training,
                                const DataFiles& data) {
  if (run.links.empty()) throw std::invalid_argument("a run needs at least one link");
  config::SimSettings s;
  s.train_data = data.train();
  s.workers = run.workers;
  s.links = run.links;
  s.download_rate_mbps = run.download_rate_mbps;

  auto& c = s.coordinator;
  c.max_rounds = run.max_rounds;
  c.target_accuracy = run.target;
  c.eval_every = run.eval_every;
  // Rounds are synchronous; the deadline only guards against a stuck run, and it must outlast
  // the join-time link calibration on the slowest link.
  c.round_deadline_seconds = 60.0;
  c.worker_patience_seconds = 120.0;
  c.model.kind = "softmax";
  c.model.classes = 10;
  c.optimizer.lr = training.lr;
  c.optimizer.momentum = 0.0;  // plain SGD as in the paper; keeps the broadcast update sparse
  c.training.batch_size = training.batch_size;
  c.training.seed = run.seed;
  c.allocation.method = *allocation::methodNamed(run.method.allocator);
  c.allocation.budget.mean_ratio = run.mean_ratio;
  c.allocation.budget.mean_threshold = run.mean_threshold;
  c.allocation.budget.round_overhead_seconds = run.round_overhead_seconds;
  c.allocation.budget.seconds_per_round = run.seconds_per_round;
  c.allocation.budget.whole_packets = run.whole_packets;
  c.allocation.reallocate_every = run.reallocate_every;
  // The study's budgets are volumes of coordinates (and their link seconds at the configured
  // 8 bytes each, uniformLinkSeconds), the same for every method: not re-priced by what the
  // pushes measure.
  c.allocation.measure_push_bytes = false;
  c.test_data = data.test();
  c.logging.level = "warn";

  auto& w = s.worker;
  w.compressor.name = run.method.compressor;
  w.error_feedback = true;
  // "fixed" sends exactly the coordinator's cap: the allocation alone decides the traffic.
  w.tuning.method = tern::tuning::TunerKind::kFixed;
  w.partition.dirichlet_alpha = training.dirichlet_alpha;
  w.partition.volume_ratio = run.sr;
  w.partition.seed = run.seed;
  w.link.measure = run.measure_links;
  w.coordinator_patience_seconds = 120.0;
  return s;
}

uint32_t modelDimension() {
  ml::ModelSpec spec;
  spec.kind = "softmax";
  spec.features = 28 * 28;
  spec.classes = 10;
  return uint32_t(ml::makeModel(spec)->numParams());
}

double uniformLinkSeconds(const RunSpec& run) {
  const allocation::Budget budget;  // bytes per coordinate and packet size as the coordinator's
  const auto cap =
      static_cast<uint64_t>(std::max(1.0, std::floor(run.mean_ratio * modelDimension())));
  const uint64_t packets =
      (cap * budget.bytes_per_coordinate + budget.packet_bytes - 1) / budget.packet_bytes;
  double seconds = 0.0;
  for (const auto& link : run.links) {
    seconds += double(packets) * budget.packet_bytes * 8.0 / (link.rate_mbps * 1e6);
  }
  return seconds;
}

double roundOverheadSeconds(const RunSpec& run) {
  double compute = 0.0;
  double latency = 0.0;
  for (const auto& link : run.links) {
    compute = std::max(compute, link.compute_seconds);
    latency = std::max(latency, link.latency_ms / 1000.0);
  }
  return compute + latency;
}

}  // namespace tern::bench::dagc
