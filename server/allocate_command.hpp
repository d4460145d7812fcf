#pragma once
// `tern-coordinator allocate`: print an allocation plan as JSON so operators can inspect it
// before they deploy it.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tern::server {

struct AllocateOptions {
  std::vector<double> shares;
  std::vector<double> costs;        // seconds per packet of each worker's link (cost-aware)
  std::vector<double> fixed_costs;  // fixed seconds per upload of each worker's link
  double mean_ratio = 0.01;
  double bytes_per_round = 0.0;
  double seconds_per_round = 0.0;
  double mean_threshold = 0.0;
  double deadline = 0.0;
  double round_overhead = 0.0;
  bool whole_packets = false;
  double bytes_per_coordinate = 8.0;
  double bytes_per_push = 0.0;
  // Each worker's own prices (as a running coordinator measures them per worker); empty: the
  // prices above for everyone.
  std::vector<double> worker_bytes_per_coordinate;
  std::vector<double> worker_bytes_per_push;
  uint32_t packet_bytes = 1448;
  uint32_t dim = 0;
  std::string method = "uniform";
};

void addAllocateOptions(CLI::App& app, AllocateOptions& o);
int runAllocate(const AllocateOptions& o);

}  // namespace tern::server
