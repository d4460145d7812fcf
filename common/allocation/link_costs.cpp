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

// A fixed cost of exactly 0 is what a fit clamped at a >= 0 reports (papers/cat.md, measured
// model), never a real link's latency: it counts as unknown, like b = 0.
bool fittedFixed(const WorkerLoad& w) {
  return fitted(w) && std::isfinite(w.seconds_fixed) && w.seconds_fixed > 0.0;
}

}  // namespace

LinkCosts linkCosts(const std::vector<WorkerLoad>& workers, const Budget& budget) {
  if (budget.packet_bytes == 0) {
    throw std::invalid_argument("allocation: packet_bytes must be positive");
  }
  if (!(budget.bytes_per_coordinate > 0.0)) {
    throw std::invalid_argument("allocation: bytes_per_coordinate must be positive");
  }
  // Each worker's coordinates take the link time of their own bytes (its compressor's price);
  // the fallback b is a median at the budget's price, rescaled to the worker's.
  const double packets_per_coordinate = budget.bytes_per_coordinate / budget.packet_bytes;
  std::vector<PushPrice> prices(workers.size());
  std::vector<double> own_packets_per_coordinate(workers.size());
  for (std::size_t i = 0; i < workers.size(); ++i) {
    prices[i] = pushPrice(workers[i], budget);
    if (!(prices[i].per_coordinate > 0.0)) {
      throw std::invalid_argument("allocation: bytes_per_coordinate must be positive");
    }
    own_packets_per_coordinate[i] = prices[i].per_coordinate / budget.packet_bytes;
  }
  LinkCosts links;
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
    links.per_coordinate[i] =
        fitted(w) ? w.seconds_per_packet * own_packets_per_coordinate[i]
                  : fallback_b * (prices[i].per_coordinate / budget.bytes_per_coordinate);
    links.fixed[i] = fittedFixed(w) ? w.seconds_fixed : fallback_a;
    // The push's own bytes (envelope, frames, codec header) take link time on every upload;
    // whole packets hold them in the first packet's room instead.
    if (!whole_packets) {
      links.fixed[i] += links.per_coordinate[i] / prices[i].per_coordinate * prices[i].per_push;
    }
  }
  links.unit.assign(workers.size(), 1);
  if (whole_packets) {
    // Each worker's packet holds the coordinates that fit beside its push's fixed bytes at its
    // own prices.
    for (std::size_t i = 0; i < workers.size(); ++i) {
      Budget own = budget;
      own.bytes_per_coordinate = prices[i].per_coordinate;
      own.bytes_per_push = prices[i].per_push;
      links.unit[i] = coordinatesPerPacket(own);
    }
    links.per_unit.resize(workers.size());
    // per_coordinate * packet_bytes / bytes_per_coordinate is the seconds per packet, fitted or
    // the median fallback.
    for (std::size_t i = 0; i < workers.size(); ++i) {
      links.per_unit[i] = links.per_coordinate[i] / own_packets_per_coordinate[i];
    }
  } else {
    links.per_unit = links.per_coordinate;
  }
  return links;
}

double LinkCosts::uploadSeconds(std::size_t worker, uint32_t k) const {
  const uint64_t units = (uint64_t{k} + unit[worker] - 1) / unit[worker];
  return fixed[worker] + per_unit[worker] * static_cast<double>(units);
}

double chargedSeconds(double per_unit, uint32_t unit, uint32_t k, double seconds) {
  if (per_unit > seconds) return 0.0;
  unit = std::max<uint32_t>(unit, 1);
  const uint64_t units = (uint64_t{k} + unit - 1) / unit;
  return per_unit * static_cast<double>(units);
}

uint32_t capWithin(double per_unit, uint32_t unit, uint32_t wanted, double room, double seconds) {
  wanted = std::max<uint32_t>(wanted, 1);
  unit = std::max<uint32_t>(unit, 1);
  if (per_unit > seconds) return std::min(wanted, unit);
  // The small slack keeps a count that lands exactly on the budget from rounding below it.
  const double units = std::floor(room / per_unit * (1.0 + 1e-12));
  if (!(units >= 1.0)) return 0;
  const double fit = units * static_cast<double>(unit);
  return fit >= static_cast<double>(wanted) ? wanted : static_cast<uint32_t>(fit);
}

uint32_t coordinatesPerPacket(const Budget& budget) {
  if (!(budget.bytes_per_coordinate > 0.0) || !(budget.bytes_per_push >= 0.0)) {
    throw std::invalid_argument(
        "allocation: bytes_per_coordinate must be positive and bytes_per_push >= 0");
  }
  // The first packet also carries the push's fixed bytes; later ones have room to spare, so
  // m of these units always fit in m packets.
  const double room = static_cast<double>(budget.packet_bytes) - budget.bytes_per_push;
  const double fit = std::floor(room / budget.bytes_per_coordinate * (1.0 + 1e-12));
  return static_cast<uint32_t>(std::clamp(fit, 1.0, double(UINT32_MAX)));
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
