#include "common/allocation/link_costs.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/allocation/budget.hpp"

namespace tern::allocation {

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

bool fitted(const WorkerLoad& w) {
  return std::isfinite(w.seconds_per_packet) && w.seconds_per_packet > 0.0;
}

// A fixed cost of exactly 0 is what a fit clamped at a >= 0 reports (docs/cat.md, method: the
// measured cost model), never a real link's latency: it counts as unknown, like b = 0.
bool fittedFixed(const WorkerLoad& w) {
  return fitted(w) && std::isfinite(w.seconds_fixed) && w.seconds_fixed > 0.0;
}

// Each worker's push prices, and its packets per coordinate at its own bytes per coordinate.
struct WorkerPrices {
  std::vector<PushPrice> push;
  std::vector<double> packets_per_coordinate;
};

WorkerPrices workerPrices(const std::vector<WorkerLoad>& workers, const Budget& budget) {
  WorkerPrices out{std::vector<PushPrice>(workers.size()), std::vector<double>(workers.size())};
  for (std::size_t i = 0; i < workers.size(); ++i) {
    out.push[i] = pushPrice(workers[i], budget);
    if (!(out.push[i].per_coordinate > 0.0)) {
      throw std::invalid_argument("allocation: bytes_per_coordinate must be positive");
    }
    out.packets_per_coordinate[i] = out.push[i].per_coordinate / budget.packet_bytes;
  }
  return out;
}

// b_i and a_i of every worker: fitted, else the median of the fitted ones. Each worker's
// coordinates take the link time of their own bytes (its compressor's price); the fallback b is
// a median at the budget's price, rescaled to the worker's.
void priceCoordinates(const std::vector<WorkerLoad>& workers, const Budget& budget,
                      const WorkerPrices& prices, LinkCosts& links) {
  const double packets_per_coordinate = budget.bytes_per_coordinate / budget.packet_bytes;
  std::vector<double> known_b;
  std::vector<double> known_a;
  for (const WorkerLoad& w : workers) {
    if (fitted(w)) known_b.push_back(w.seconds_per_packet * packets_per_coordinate);
    if (fittedFixed(w)) known_a.push_back(w.seconds_fixed);
  }
  links.known = !known_b.empty();
  const double fallback_b = links.known ? median(known_b) : 1.0;
  const double fallback_a = known_a.empty() ? 0.0 : median(known_a);
  links.per_coordinate.resize(workers.size());
  links.fixed.resize(workers.size());
  const bool whole_packets = links.known && pricesWholePackets(budget);
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const WorkerLoad& w = workers[i];
    const PushPrice& price = prices.push[i];
    links.per_coordinate[i] =
        fitted(w) ? w.seconds_per_packet * prices.packets_per_coordinate[i]
                  : fallback_b * (price.per_coordinate / budget.bytes_per_coordinate);
    links.fixed[i] = fittedFixed(w) ? w.seconds_fixed : fallback_a;
    // The push's own bytes (envelope, frames, codec header) take link time on every upload;
    // whole packets hold them in the first packet's room instead.
    if (!whole_packets) {
      links.fixed[i] += links.per_coordinate[i] / price.per_coordinate * price.per_push;
    }
  }
}

// Prices worker i in whole packets: its packets hold the coordinates that fit beside its push's
// fixed bytes at its own prices.
void priceWholePackets(std::size_t i, const Budget& budget, const WorkerPrices& prices,
                       LinkCosts& links) {
  // per_coordinate * packet_bytes / bytes_per_coordinate is the seconds per packet, fitted or
  // the median fallback.
  links.per_unit[i] = links.per_coordinate[i] / prices.packets_per_coordinate[i];
  Budget own = budget;
  own.bytes_per_coordinate = prices.push[i].per_coordinate;
  own.bytes_per_push = prices.push[i].per_push;
  Packing packing = wholePackets(own);
  // Fixed bytes that fill whole packets before the first coordinate's (a push of more than a
  // packet's fixed bytes) go on every upload whatever its cap: they are fixed time, like a_i,
  // and the packets the budget buys start at the one the first coordinate is in.
  const double filled =
      std::ceil((packing.push_bytes + packing.coordinate_bytes) / packing.packet_bytes) - 1.0;
  if (filled >= 1.0 && packing.coordinate_bytes <= packing.packet_bytes) {
    packing.push_bytes -= filled * packing.packet_bytes;
    links.fixed[i] += filled * links.per_unit[i];
  }
  links.packing[i] = packing;
}

}  // namespace

LinkCosts linkCosts(const std::vector<WorkerLoad>& workers, const Budget& budget) {
  if (budget.packet_bytes == 0) {
    throw std::invalid_argument("allocation: packet_bytes must be positive");
  }
  if (!(budget.bytes_per_coordinate > 0.0)) {
    throw std::invalid_argument("allocation: bytes_per_coordinate must be positive");
  }
  const WorkerPrices prices = workerPrices(workers, budget);
  LinkCosts links;
  priceCoordinates(workers, budget, prices, links);
  links.packing.assign(workers.size(), Packing{});
  if (links.known && pricesWholePackets(budget)) {
    links.per_unit.resize(workers.size());
    for (std::size_t i = 0; i < workers.size(); ++i) priceWholePackets(i, budget, prices, links);
  } else {
    links.per_unit = links.per_coordinate;
  }
  return links;
}

uint32_t Packing::coordinates(uint64_t units) const {
  const auto saturated = [](double v) {
    return static_cast<uint32_t>(std::min(v, static_cast<double>(UINT32_MAX)));
  };
  if (!(packet_bytes > 0.0)) return saturated(static_cast<double>(units));
  // The small slack keeps a count that lands exactly on a packet's end from rounding below it.
  const double room = static_cast<double>(units) * packet_bytes - push_bytes;
  const double fit = std::floor(room / coordinate_bytes * (1.0 + 1e-12));
  return saturated(std::max(fit, static_cast<double>(units)));
}

uint64_t Packing::unitsFor(uint32_t k) const {
  if (k == 0) return 0;
  if (!(packet_bytes > 0.0)) return k;
  // ceil((push + c k) / P), then moved to the exact fewest units that coordinates() agrees on.
  const double guess = std::ceil((push_bytes + coordinate_bytes * k) / packet_bytes);
  uint64_t m = static_cast<uint64_t>(std::clamp(guess, 1.0, static_cast<double>(k)));
  while (m > 1 && coordinates(m - 1) >= k) --m;
  while (coordinates(m) < k) ++m;
  return m;
}

Packing wholePackets(const Budget& budget) {
  if (!(budget.bytes_per_coordinate > 0.0) || !(budget.bytes_per_push >= 0.0)) {
    throw std::invalid_argument(
        "allocation: bytes_per_coordinate must be positive and bytes_per_push >= 0");
  }
  Packing p;
  p.packet_bytes = static_cast<double>(budget.packet_bytes);
  p.push_bytes = budget.bytes_per_push;
  p.coordinate_bytes = budget.bytes_per_coordinate;
  return p;
}

double LinkCosts::uploadSeconds(std::size_t worker, uint32_t k) const {
  return fixed[worker] + per_unit[worker] * static_cast<double>(packing[worker].unitsFor(k));
}

double chargedSeconds(double per_unit, const Packing& packing, uint32_t k, double seconds) {
  if (per_unit > seconds) return 0.0;
  return per_unit * static_cast<double>(packing.unitsFor(k));
}

uint32_t capWithin(double per_unit, const Packing& packing, uint32_t wanted, double room,
                   double seconds) {
  wanted = std::max<uint32_t>(wanted, 1);
  if (per_unit > seconds) return std::min(wanted, packing.coordinates(1));
  // The small slack keeps a count that lands exactly on the budget from rounding below it.
  const double units = std::floor(room / per_unit * (1.0 + 1e-12));
  if (!(units >= 1.0)) return 0;
  const uint64_t whole = static_cast<uint64_t>(std::min(units, static_cast<double>(UINT32_MAX)));
  return std::min(wanted, packing.coordinates(whole));
}

bool pricesWholePackets(const Budget& budget) {
  return budget.whole_packets && budget.seconds_per_round > 0.0;
}

uint32_t deadlineUnits(const LinkCosts& links, std::size_t worker, uint32_t units,
                       const Budget& budget) {
  const double room = (budget.deadline_seconds - links.fixed[worker]) / links.per_unit[worker];
  // The small slack keeps a count that lands exactly on the deadline from rounding below it.
  const double m = std::floor(room * (1.0 + 1e-12));
  return static_cast<uint32_t>(std::clamp(m, 1.0, static_cast<double>(units)));
}

}  // namespace tern::allocation
