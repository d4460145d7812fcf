#include "server/allocate_command.hpp"

#include <cmath>
#include <iostream>

#include "common/allocation/allocator.hpp"
#include "common/allocation/budget_rules.hpp"
#include "common/config/command_line.hpp"

namespace tern::server {

void addAllocateOptions(CLI::App& app, AllocateOptions& o) {
  app.add_option("--shares", o.shares, "data share of each worker (normalised to sum 1)")
      ->delimiter(',')
      ->required();
  app.add_option("--costs", o.costs, "seconds per packet of each worker's link (cost-aware)")
      ->delimiter(',')
      ->check(config::finiteNumber(0.0, false));  // 0: not fitted yet
  app.add_option("--fixed-costs", o.fixed_costs,
                 "fixed seconds per upload of each worker's link (cost-aware deadlines)")
      ->delimiter(',')
      ->check(config::finiteNumber(0.0, false));
  app.add_option("--deadline", o.deadline, "cost-aware: no upload may take longer (seconds)")
      ->check(config::finiteNumber(0.0, false));
  app.add_option("--round-overhead", o.round_overhead,
                 "cost-aware: seconds of a round besides the slowest upload; picks the deadline "
                 "minimising Phi * round time")
      ->check(config::finiteNumber(0.0, false));
  app.add_flag("--whole-packets", o.whole_packets,
               "cost-aware with --seconds-per-round: price uploads in whole packets and fill them");
  app.add_option("--mean-ratio", o.mean_ratio, "mean keep ratio (budget)")
      ->check(config::finiteNumber(0.0, false))
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--bytes-per-round", o.bytes_per_round, "budget in bytes per round")
      ->check(config::finiteNumber(0.0, false));
  app.add_option("--seconds-per-round", o.seconds_per_round, "budget in link seconds per round")
      ->check(config::finiteNumber(0.0, false));
  app.add_option("--mean-threshold", o.mean_threshold, "lambda_bar for dagc-a")
      ->check(config::finiteNumber(0.0, false));
  app.add_option("--bytes-per-coordinate", o.bytes_per_coordinate,
                 "wire bytes a kept coordinate costs (a running coordinator measures it)")
      ->check(CLI::Range(0.125, 64.0));
  app.add_option("--bytes-per-push", o.bytes_per_push,
                 "wire bytes a push costs besides its coordinates (envelope, frames)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--worker-bytes-per-coordinate", o.worker_bytes_per_coordinate,
                 "each worker's own bytes per kept coordinate (its compressor's), in place of "
                 "--bytes-per-coordinate")
      ->delimiter(',')
      ->check(CLI::Range(0.125, 64.0));
  app.add_option("--worker-bytes-per-push", o.worker_bytes_per_push,
                 "each worker's own bytes per push besides its coordinates (needs "
                 "--worker-bytes-per-coordinate; default: --bytes-per-push for each)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--packet-bytes", o.packet_bytes, "payload bytes per packet")
      ->check(CLI::Range(64, 65536));
  app.add_option("--dim", o.dim, "model dimension d")->required();
  app.add_option("--method", o.method, "uniform|dagc-r|dagc-a|dagc-opt|cost-aware");
}

namespace {

allocation::Budget budgetOf(const AllocateOptions& o) {
  allocation::Budget b;
  b.mean_ratio = o.mean_ratio;
  b.bytes_per_round = o.bytes_per_round;
  b.seconds_per_round = o.seconds_per_round;
  b.mean_threshold = o.mean_threshold;
  b.deadline_seconds = o.deadline;
  b.round_overhead_seconds = o.round_overhead;
  b.whole_packets = o.whole_packets;
  b.bytes_per_coordinate = o.bytes_per_coordinate;
  b.bytes_per_push = o.bytes_per_push;
  b.packet_bytes = o.packet_bytes;
  return b;
}

// The flag that sets a Budget field.
std::string flagOf(const std::string& field) {
  if (field == "deadline_seconds") return "--deadline";
  if (field == "round_overhead_seconds") return "--round-overhead";
  std::string flag = "--" + field;
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

// The budget's options fit the method (the configuration's allocation section meets the same
// rules); else the first fault is said on stderr. An unknown method is makeAllocator's to say.
bool checkBudgetOptions(const AllocateOptions& o) {
  const auto method = allocation::methodNamed(o.method);
  if (!method) return true;
  if (auto fault = allocation::budgetFault(*method, budgetOf(o), flagOf)) {
    std::cerr << "tern-coordinator allocate: " << fault->why << '\n';
    return false;
  }
  return true;
}

// The options' values are usable; else the first fault is said on stderr.
bool checkAllocateOptions(const AllocateOptions& o) {
  for (double s : o.shares) {
    if (!(s > 0.0) || !std::isfinite(s)) {
      std::cerr << "tern-coordinator allocate: every share must be a positive number\n";
      return false;
    }
  }
  const auto perWorker = [&](const std::vector<double>& values, const char* option) {
    if (values.empty() || values.size() == o.shares.size()) return true;
    std::cerr << "tern-coordinator allocate: " << option << " needs one value per share\n";
    return false;
  };
  if (!perWorker(o.costs, "--costs") || !perWorker(o.fixed_costs, "--fixed-costs") ||
      !perWorker(o.worker_bytes_per_coordinate, "--worker-bytes-per-coordinate") ||
      !perWorker(o.worker_bytes_per_push, "--worker-bytes-per-push")) {
    return false;
  }
  if (!o.worker_bytes_per_push.empty() && o.worker_bytes_per_coordinate.empty()) {
    std::cerr << "tern-coordinator allocate: --worker-bytes-per-push needs "
                 "--worker-bytes-per-coordinate\n";
    return false;
  }
  if (o.dim == 0) {
    std::cerr << "tern-coordinator allocate: --dim must be positive\n";
    return false;
  }
  return checkBudgetOptions(o);
}

}  // namespace

int runAllocate(const AllocateOptions& o) {
  if (!checkAllocateOptions(o)) return 2;
  double total = 0.0;
  for (double s : o.shares) total += s;
  std::vector<allocation::WorkerLoad> loads;
  for (size_t i = 0; i < o.shares.size(); ++i) {
    allocation::WorkerLoad l;
    l.share = o.shares[i] / total;
    if (!o.costs.empty()) l.seconds_per_packet = o.costs[i];
    if (!o.fixed_costs.empty()) l.seconds_fixed = o.fixed_costs[i];
    if (!o.worker_bytes_per_coordinate.empty()) {
      l.price = allocation::PushPrice{
          o.worker_bytes_per_push.empty() ? o.bytes_per_push : o.worker_bytes_per_push[i],
          o.worker_bytes_per_coordinate[i]};
    }
    loads.push_back(l);
  }
  const allocation::Budget b = budgetOf(o);
  std::unique_ptr<allocation::Allocator> allocator;
  try {
    allocator = allocation::makeAllocator(o.method);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tern-coordinator allocate: " << e.what() << '\n';
    return 2;
  }
  allocation::Allocation plan;
  try {
    plan = allocator->allocate(loads, o.dim, b);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tern-coordinator allocate: " << e.what() << '\n';
    return 2;
  }
  std::cout << allocation::allocationToJson(loads, o.dim, b, plan, o.method) << std::endl;
  return 0;
}

}  // namespace tern::server
