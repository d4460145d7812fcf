#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "common/allocation/allocator.hpp"
#include "common/allocation/budget.hpp"
#include "common/allocation/link_costs.hpp"

namespace tern::allocation {

namespace {

using OrderedJson = nlohmann::ordered_json;

// The ratio every worker would get from the same budget split evenly: the same link seconds
// for a cost-aware seconds budget, otherwise the same volume; NaN when the budget says neither.
double evenRatio(const std::vector<WorkerLoad>& workers, uint32_t dim, const Budget& budget,
                 const std::string& method, const LinkCosts& links) {
  if (method == "cost-aware" && links.known && pricesWholePackets(budget)) {
    // Whole packets: the same number of packets for everyone, as many as the seconds buy,
    // each holding what the sparsest packing of them all holds (the same ratio for all).
    double seconds_per_packet_each = 0.0;
    for (double b : links.per_unit) seconds_per_packet_each += b;
    const double packets =
        std::max(1.0, std::floor(budget.seconds_per_round / seconds_per_packet_each));
    uint32_t sparsest = UINT32_MAX;
    for (const Packing& p : links.packing) {
      sparsest = std::min(sparsest, p.coordinates(static_cast<uint64_t>(packets)));
    }
    return std::min(1.0, double(sparsest) / dim);
  }
  if (method == "cost-aware" && links.known && budget.seconds_per_round > 0.0) {
    double seconds_per_ratio = 0.0;
    for (double b : links.per_coordinate) seconds_per_ratio += b * dim;
    return std::min(1.0, budget.seconds_per_round / seconds_per_ratio);
  }
  if (budget.bytes_per_round > 0.0 || budget.mean_ratio > 0.0) {
    const VolumeBudget volume = volumeBudget(workers, dim, budget);
    return volume.total / volume.weightSum();
  }
  return std::nan("");
}

OrderedJson budgetJson(const Budget& budget) {
  OrderedJson j;
  j["mean_ratio"] = budget.mean_ratio;
  j["bytes_per_round"] = budget.bytes_per_round;
  j["seconds_per_round"] = budget.seconds_per_round;
  j["mean_threshold"] = budget.mean_threshold;
  j["deadline_seconds"] = budget.deadline_seconds;
  j["round_overhead_seconds"] = budget.round_overhead_seconds;
  j["bytes_per_coordinate"] = budget.bytes_per_coordinate;
  j["bytes_per_push"] = budget.bytes_per_push;
  j["packet_bytes"] = budget.packet_bytes;
  j["whole_packets"] = budget.whole_packets;
  return j;
}

// The key factor of what is sent: the integer caps (at least 1, rounded to the budget) can sit
// far from the planned ratios when they are a few coordinates each.
double phiOfCaps(const std::vector<double>& shares, const std::vector<uint32_t>& caps,
                 uint32_t dim) {
  const std::size_t n = shares.size();
  if (n == 0 || dim == 0 || caps.size() != n) return std::nan("");
  std::vector<double> sent(n);
  for (std::size_t i = 0; i < n; ++i) sent[i] = double(caps[i]) / double(dim);
  return keyFactor(shares, sent);
}

}  // namespace

std::string allocationToJson(const std::vector<WorkerLoad>& workers, uint32_t dim,
                             const Budget& budget, const Allocation& allocation,
                             const std::string& method) {
  const std::size_t n = workers.size();
  if (allocation.ratios.size() != n || allocation.caps.size() != n ||
      (!allocation.thresholds.empty() && allocation.thresholds.size() != n)) {
    throw std::invalid_argument("allocationToJson: allocation does not match the workers");
  }
  const std::vector<double> shares = normalisedShares(workers);
  double total_ratio = 0.0;
  uint64_t total_caps = 0;
  double total_bytes = 0.0;
  std::vector<double> push_bytes(n);  // each push at its worker's prices
  for (std::size_t i = 0; i < n; ++i) {
    total_ratio += allocation.ratios[i];
    total_caps += allocation.caps[i];
    const PushPrice price = pushPrice(workers[i], budget);
    push_bytes[i] = price.per_push + price.per_coordinate * allocation.caps[i];
    total_bytes += push_bytes[i];
  }
  // Phi of giving every worker the same ratio under the same budget, for scale.
  const LinkCosts links = budget.packet_bytes > 0 ? linkCosts(workers, budget) : LinkCosts{};
  double phi_uniform = std::nan("");
  if (n > 0 && dim > 0) {
    const double even = evenRatio(workers, dim, budget, method, links);
    if (std::isfinite(even)) phi_uniform = keyFactor(shares, std::vector<double>(n, even));
  }
  OrderedJson j;
  j["method"] = method;
  j["dim"] = dim;
  j["workers"] = n;
  j["budget"] = budgetJson(budget);
  j["phi"] = allocation.phi;
  j["phi_caps"] = phiOfCaps(shares, allocation.caps, dim);
  j["phi_uniform"] = phi_uniform;
  j["total_ratio"] = total_ratio;
  j["total_coordinates"] = total_caps;
  j["total_bytes"] = total_bytes;
  j["shares"] = shares;
  j["ratios"] = allocation.ratios;
  j["caps"] = allocation.caps;
  j["thresholds"] = allocation.thresholds;
  j["push_bytes"] = push_bytes;
  if (links.known) {
    std::vector<double> seconds(n);
    for (std::size_t i = 0; i < n; ++i) seconds[i] = links.uploadSeconds(i, allocation.caps[i]);
    j["upload_seconds"] = seconds;
  }
  // NaN and infinities become null; bytes that are not UTF-8 become U+FFFD.
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace tern::allocation
