#pragma once
// Per-coordinate link costs for cost-aware allocation (docs/dagc.md, method: the cost-aware
// generalisation): b_i = seconds_per_packet * bytes_per_coordinate / packet_bytes from each
// worker's fitted link model at its own bytes per coordinate (WorkerLoad, else the budget's),
// a_i its fixed cost. Workers without a fitted link get the median of
// the fitted ones, so a newcomer is neither favoured nor starved until it has been measured;
// likewise a fixed cost a_i <= 0 (a fit clamped at zero) takes the median of the positive ones.
#include <cstdint>
#include <vector>

#include "common/allocation/allocator.hpp"

namespace tern::allocation {

// How many coordinates m pricing units hold on one worker's link. Priced by the coordinate
// (packet_bytes 0) a unit is one coordinate. In whole packets, m packets hold what fits beside
// the push's fixed bytes, which travel once, in the first: floor((m P - push) / c) coordinates
// of c bytes (at least m, for a push or a coordinate larger than a packet).
struct Packing {
  double packet_bytes = 0.0;  // P; 0 = one unit per coordinate
  double push_bytes = 0.0;
  double coordinate_bytes = 1.0;

  // Coordinates that m units hold (saturating at UINT32_MAX).
  uint32_t coordinates(uint64_t units) const;
  // The fewest units that hold k coordinates: ceil((push + c k) / P) in whole packets; 0 for k 0.
  uint64_t unitsFor(uint32_t k) const;
};

struct LinkCosts {
  bool known = false;                  // at least one worker has a fitted link
  std::vector<double> per_coordinate;  // b_i, seconds per kept coordinate
  std::vector<double> fixed;  // a_i (+ the push's fixed bytes, unless whole packets), s per upload
  // What an upload is priced in: units of `packing[i]` at `per_unit[i]` seconds each. One
  // coordinate at b_i by default; with Budget::whole_packets (a link-seconds budget and fitted
  // links) one packet at the fitted seconds per packet, so k coordinates cost
  // a_i + per_unit_i * ceil((push_i + c_i k) / P), the link model itself, at the worker's own
  // bytes per push and per coordinate.
  std::vector<Packing> packing;
  std::vector<double> per_unit;

  // Modelled upload time of k coordinates on worker i's link.
  double uploadSeconds(std::size_t worker, uint32_t k) const;
};

// What k coordinates take of a round's link-seconds budget `seconds`, as cost-aware charges a
// worker priced `per_unit` seconds a unit of `packing` (LinkCosts): per_unit times the units
// k needs, the fixed a_i aside; nothing for a worker whose one unit alone costs more than the
// budget (a stalled link is planned one unit, uncharged).
double chargedSeconds(double per_unit, const Packing& packing, uint32_t k, double seconds);
// The largest cap of at most `wanted` coordinates (what whole units hold, or `wanted` itself)
// that such a worker can send within `room` seconds of the budget `seconds`, charged as above; 0
// when not one unit fits. A stalled worker gets one unit, as in a plan.
uint32_t capWithin(double per_unit, const Packing& packing, uint32_t wanted, double room,
                   double seconds);

// The packing of whole packets at the budget's packet, push and coordinate bytes.
Packing wholePackets(const Budget& budget);

// True when cost-aware prices in whole packets: Budget::whole_packets with a link-seconds budget.
bool pricesWholePackets(const Budget& budget);

// Throws std::invalid_argument if packet_bytes is 0. When no link is known, every b_i is 1 and
// `known` is false: the costs are then equal and carry no unit.
LinkCosts linkCosts(const std::vector<WorkerLoad>& workers, const Budget& budget);

// Largest number of pricing units m_i (coordinates, or packets with whole_packets) with
// a_i + per_unit_i * m_i <= deadline_seconds, within [1, units]. When even one unit misses the
// deadline the answer is 1: a worker always sends something.
uint32_t deadlineUnits(const LinkCosts& links, std::size_t worker, uint32_t units,
                       const Budget& budget);

}  // namespace tern::allocation
