#pragma once
// Compression caps per worker (docs/dagc.md, method). An allocator maps the workers' data shares
// (and, for cost-aware allocation, their fitted link models) to a keep-ratio delta_i, an integer
// cap k_i in [1, d] and, for threshold compressors, a threshold lambda_i.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tern::allocation {

// What one push costs on the wire: per_push + per_coordinate * k bytes for k coordinates.
struct PushPrice {
  double per_push = 0.0;
  double per_coordinate = 0.0;
  bool operator==(const PushPrice&) const = default;
};

struct WorkerLoad {
  double share = 0.0;               // p_i, sums to 1 over the workers
  double seconds_per_packet = 0.0;  // fitted link b_i (0 = unknown)
  double seconds_fixed = 0.0;       // fitted link a_i (0 = unknown)
  // What this worker's pushes cost, measured from its own pushes (its compressor and codec).
  // nullopt (or no positive per_coordinate): the budget's bytes_per_push and
  // bytes_per_coordinate price it.
  std::optional<PushPrice> price;
};

struct Budget {
  double mean_ratio = 0.01;        // sum_i delta_i = n * mean_ratio
  double bytes_per_round = 0.0;    // alternative budget (0 = unused)
  double seconds_per_round = 0.0;  // alternative budget for cost-aware (0 = unused)
  double mean_threshold = 0.0;     // lambda_bar for dagc-a / uniform threshold
  double deadline_seconds = 0.0;   // cost-aware: no worker's upload may exceed it (0 = none)
  // cost-aware with fitted links and no fixed deadline: the part of a round no allocation
  // changes (compute, broadcast, downlink latency). When > 0, cost-aware chooses the deadline
  // itself, minimising Phi * (round_overhead_seconds + slowest upload a_i + b_i * k_i), the
  // key factor times the round time of a synchronous round (0 = off).
  double round_overhead_seconds = 0.0;
  // What a push costs on the wire: bytes_per_push + bytes_per_coordinate * k for k kept
  // coordinates (index + value; the coordinator measures both from the pushes it receives
  // unless allocation.bytes_per_coordinate is configured, which keeps bytes_per_push at 0).
  // These price every worker without prices of its own (WorkerLoad::bytes_per_coordinate).
  double bytes_per_coordinate = 8.0;
  double bytes_per_push = 0.0;
  uint32_t packet_bytes = 1448;
  // cost-aware under seconds_per_round: price uploads in whole packets as the link model does
  // (a_i + b_i * ceil(bytes / packet_bytes)) rather than per coordinate, so every cap fills the
  // packets it pays for: m packets hold
  // floor((m * packet_bytes - bytes_per_push) / bytes_per_coordinate) coordinates (or d), the
  // push's fixed bytes travelling once; at least one packet each. Ignored without a seconds
  // budget or fitted links.
  bool whole_packets = false;
};

struct Allocation {
  std::vector<double> ratios;      // delta_i
  std::vector<uint32_t> caps;      // k_i
  std::vector<double> thresholds;  // lambda_i (empty unless a threshold method)
  double phi = 0.0;                // key factor of the ratios (docs/dagc.md, method)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::string name() const = 0;
  virtual Allocation allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                              const Budget& budget) const = 0;
};

// Phi(delta) = (sum_i p_i / sqrt(delta_i)) / sqrt(min_i delta_i).
double keyFactor(const std::vector<double>& shares, const std::vector<double>& ratios);

// The allocation methods, one per name of allocatorNames().
enum class Method { kUniform, kDagcR, kDagcA, kDagcOpt, kCostAware };

// Whether `method` under `budget` sizes caps by the workers' link times beyond the caps in force
// (cost-aware with a link-seconds budget, an upload deadline or a round overhead to choose one
// by): the workers then measure their links over every calibration size, not only what a push
// at their cap could take (docs/link-model.md, "Probes a push can use").
bool plansByLinkTime(Method method, const Budget& budget);

// The method named `name` (allocatorNames()), or nullopt.
std::optional<Method> methodNamed(const std::string& name);
// The configuration's word for `method` ("uniform", "dagc-r", ...).
const char* methodName(Method method);
std::unique_ptr<Allocator> makeAllocator(Method method);
// uniform | dagc-r | dagc-a | dagc-opt | cost-aware. Throws std::invalid_argument otherwise.
std::unique_ptr<Allocator> makeAllocator(const std::string& name);
std::vector<std::string> allocatorNames();

// The allocation as one JSON object (method, dim, budget, shares, ratios, caps, thresholds, Phi,
// Phi of an even split of the same budget, totals, and per-worker upload seconds a_i + b_i * k_i
// when links are fitted): what `tern-coordinator allocate` prints. Non-finite numbers are
// written as null. Throws std::invalid_argument if the allocation does not match the workers.
std::string allocationToJson(const std::vector<WorkerLoad>& workers, uint32_t dim,
                             const Budget& budget, const Allocation& allocation,
                             const std::string& method);

}  // namespace tern::allocation
