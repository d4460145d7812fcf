#pragma once
// The experiments of the DAGC reproduction (issue 6, papers/dagc.md "Experiments to compare
// against"): what one simulator run is (RunSpec), the methods compared, and the translation of a
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
  double mean_threshold = 0.0;     // lambda_bar, threshold methods
  double seconds_per_round = 0.0;  // cost-aware link-time budget (0 = volume budget)
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

// The link-seconds per round that uniform top-k caps cost on these links at their nominal
// rates: sum_i k_i^uniform * bytes_per_coordinate * 8 / rate_i. The cost-aware allocator prices a
// coordinate of worker i at (fitted seconds per packet) * bytes_per_coordinate / packet_bytes;
// when the fits match the nominal rates this budget buys uniform's traffic exactly, or any other
// split of the same link time. The rule is fixed before the run, so a fit that strays from the
// nominal rate changes what the budget buys.
double uniformLinkSeconds(const RunSpec& run);

}  // namespace tern::bench::dagc
