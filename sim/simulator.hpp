#pragma once
// tern-sim: the coordinator core and N worker cores in one process, on a virtual clock, over
// modelled links (per-worker uplink rate and latency, a downlink rate, per-worker compute time).
// The same seed and configuration give the same run, byte for byte.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/config/settings.hpp"
#include "server/coordinator_core.hpp"
#include "worker/worker_core.hpp"

namespace tern::sim {

struct SimResult {
  server::RoundRecord last;
  uint64_t rounds = 0;              // rounds closed
  uint64_t replica_mismatches = 0;  // workers whose replica differs from the coordinator's model
  double virtual_seconds = 0.0;
  uint64_t events = 0;
  std::vector<uint64_t> sent_to_worker;  // bytes the coordinator handed to each worker's downlink
  std::vector<worker::WorkerStats> workers;  // each worker core's own counters at the end
};

class Simulator {
 public:
  explicit Simulator(const config::SimSettings& settings);
  ~Simulator();
  // Runs to the end of training. on_round sees every closed round.
  SimResult run(const std::function<void(const server::RoundRecord&)>& on_round = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::sim
