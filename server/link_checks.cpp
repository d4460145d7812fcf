#include "server/link_checks.hpp"

#include <algorithm>
#include <cmath>

namespace tern::server {
namespace {

constexpr double kMaxSeconds = 86400.0;
// A measured b faster than a packet at 1 Tbit/s would be priced as free by the allocator.
constexpr double kFastestBitsPerSecond = 1e12;

const char* invalidNumbers(const wire::LinkModel& l) {
  for (double v : {l.a_seconds(), l.b_seconds_per_packet(), l.r2()}) {
    if (!std::isfinite(v)) return "non-finite value";
  }
  // A standard error is +inf while the fit cannot compute it.
  if (std::isnan(l.a_stderr()) || std::isnan(l.b_stderr())) return "NaN standard error";
  if (l.b_seconds_per_packet() < 0 || l.b_seconds_per_packet() > kMaxSeconds)
    return "b out of range";
  return nullptr;
}

}  // namespace

const char* invalidLinkModel(const wire::LinkModel& l, size_t max_message_bytes) {
  if (const char* why = invalidNumbers(l)) return why;
  const bool measured = l.samples() > 0 || l.b_seconds_per_packet() > 0;
  if (measured && (l.packet_bytes() < 64 || l.packet_bytes() > 65536)) {
    return "packet size out of range";
  }
  const double packet_bytes = measured ? l.packet_bytes() : 1448.0;
  if (l.b_seconds_per_packet() > 0 &&
      l.b_seconds_per_packet() < packet_bytes * 8.0 / kFastestBitsPerSecond) {
    return "b faster than any link";
  }
  const double max_packets = std::ceil(double(max_message_bytes) / packet_bytes);
  const double floor_a = -l.b_seconds_per_packet() * std::max(1.0, max_packets);
  const double slack = 1e-9 * std::abs(floor_a) + 1e-15;  // rounding of a = -b x
  if (l.a_seconds() < floor_a - slack || l.a_seconds() > kMaxSeconds) return "a out of range";
  if (l.a_stderr() < 0 || l.b_stderr() < 0) return "negative standard error";
  if (l.r2() > 1.0 + 1e-9) return "r2 above 1";
  return nullptr;
}

double fittedSecondsPerPacket(const wire::LinkModel& l) {
  return std::isfinite(l.b_stderr()) ? l.b_seconds_per_packet() : 0.0;
}

}  // namespace tern::server
