#pragma once
// The experiments of the DAGC reproduction (docs/dagc.md, "The study in the simulator"):
// what one simulator run is (RunSpec), the methods compared, and the translation of a
// run into simulator settings. Every method shares the same model, data split, learning rate and
// batch size; only the allocator and the compressor differ.
#include <cstdint>
#include <string>
#include <vector>

#include "common/config/settings.hpp"

namespace tern::bench::dagc {

struct Method {
  std::string label;       // as reported: uniform, dagc-r, dagc-opt, cost-aware, uniform-ht, dagc-a
  std::string allocator;   // allocation::makeAllocator name
  std::string compressor;  // topk | threshold
  bool threshold() const { return compressor == "threshold"; }
};

// In reporting order: the top-k family first, then the hard-threshold family.
const std::vector<Method>& allMethods();
const Method& methodByLabel(const std::string& label);

// Training hyper-parameters shared by every run (never tuned per method).
struct Training {
  double lr = 0.1;
  uint32_t batch_size = 32;
  double dirichlet_alpha = 0.5;
};

struct RunSpec {
  std::string setup;  // skew | motivation | hetero
  uint32_t workers = 10;
  double sr = 1.0;            // volume skew p_1 / p_n (geometric shares)
  double mean_ratio = 0.001;  // top-k budget: sum_i delta_i = n * mean_ratio
  Method method;
  uint64_t seed = 1;
  double target = 0.75;  // test accuracy that ends the run
  uint64_t max_rounds = 1000;
  uint64_t eval_every = 5;
  std::vector<config::SimLink> links;  // one per worker
  double download_rate_mbps = 100.0;
  bool measure_links = false;  // probes and link fits; only cost-aware uses the fits
  uint64_t reallocate_every = 10;
  double mean_threshold = 0.0;  // lambda_bar, threshold methods
  // cost-aware: the part of a round no allocation changes (see roundOverheadSeconds); 0 = none.
  double round_overhead_seconds = 0.0;
  // cost-aware-packets: a link-seconds budget priced in whole packets (0 / false = volume budget).
  double seconds_per_round = 0.0;
  bool whole_packets = false;
};

// Fashion-MNIST as IDX files (gzip or plain) in one directory.
struct DataFiles {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  ml::DataSource train() const;
  ml::DataSource test() const;
};

config::SimSettings simSettings(const RunSpec& run, const Training& training,
                                const DataFiles& data);

// Parameters of softmax regression on 28x28 images with 10 classes: the d of the budget.
uint32_t modelDimension();

// What a synchronous round costs besides the slowest upload on these links, from the
// simulator's link model: a worker's compute time and the downlink latency of the round start
// (the uplink latency is in each worker's fitted fixed cost a_i, which the allocator reads from
// the link fits). The broadcast's transfer time is left out: every method sends the same total
// volume, so it is the same for all. Cost-aware uses it to pick its upload deadline.
double roundOverheadSeconds(const RunSpec& run);

// The link seconds per round a uniform plan at the run's mean ratio spends on its links, priced
// as the packet model does (every worker's ceil(bytes / 1448) packets at 1448 * 8 / rate
// seconds each): the budget cost-aware-packets gets, so that it spends the same link time per
// round as uniform would, whatever the bytes.
double uniformLinkSeconds(const RunSpec& run);

}  // namespace tern::bench::dagc
