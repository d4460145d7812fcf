#include "common/costmodel/cost_model.hpp"

#include <cmath>
#include <stdexcept>

namespace tern::costmodel {

PayloadCostModel::PayloadCostModel(size_t header_bytes) : header_bytes_(header_bytes) {}

double PayloadCostModel::cost(size_t bytes) const {
  return 8.0 * static_cast<double>(bytes + header_bytes_);
}

PacketCostModel::PacketCostModel(double c_fixed, double c_packet, size_t packet_bytes,
                                 size_t overhead_bytes)
    : c_fixed_(c_fixed),
      c_packet_(c_packet),
      packet_bytes_(packet_bytes),
      overhead_bytes_(overhead_bytes) {
  if (!(c_fixed >= 0.0) || !std::isfinite(c_fixed))
    throw std::invalid_argument("packet cost model: c_fixed must be finite and >= 0");
  if (!(c_packet > 0.0) || !std::isfinite(c_packet))
    throw std::invalid_argument("packet cost model: c_packet must be finite and > 0");
  if (packet_bytes == 0) throw std::invalid_argument("packet cost model: packet_bytes must be > 0");
}

double PacketCostModel::cost(size_t bytes) const {
  return c_fixed_ + c_packet_ * static_cast<double>(packets(bytes));
}

AffineCostModel::AffineCostModel(double c_fixed, double c_byte)
    : c_fixed_(c_fixed), c_byte_(c_byte) {
  if (!(c_fixed >= 0.0) || !std::isfinite(c_fixed))
    throw std::invalid_argument("affine cost model: c_fixed must be finite and >= 0");
  if (!(c_byte > 0.0) || !std::isfinite(c_byte))
    throw std::invalid_argument("affine cost model: c_byte must be finite and > 0");
}

double AffineCostModel::cost(size_t bytes) const {
  return c_fixed_ + c_byte_ * static_cast<double>(bytes);
}

PacketCostModel packetModelOfLink(double latency_seconds, double rate_bits_per_second,
                                  size_t packet_bytes, size_t header_bytes_per_packet) {
  if (!(rate_bits_per_second > 0.0))
    throw std::invalid_argument("packet model of a link: rate must be > 0");
  const double frame_bits = 8.0 * static_cast<double>(packet_bytes + header_bytes_per_packet);
  return PacketCostModel(latency_seconds, frame_bits / rate_bits_per_second, packet_bytes);
}

double paperPayloadBits(uint64_t dim, uint64_t coordinates, uint32_t bits_per_value) {
  // ceil(log2 d) by integer arithmetic: the bits needed to write an index in [0, d).
  uint32_t index_bits = 0;
  while (index_bits < 64 && (uint64_t{1} << index_bits) < dim) ++index_bits;
  return static_cast<double>(coordinates) * static_cast<double>(index_bits + bits_per_value);
}

std::optional<CostModelKind> costModelKindNamed(const std::string& name) {
  if (name == "payload") return CostModelKind::kPayload;
  if (name == "packet") return CostModelKind::kPacket;
  if (name == "measured") return CostModelKind::kMeasured;
  if (name == "affine") return CostModelKind::kAffine;
  return std::nullopt;
}

const char* costModelKindName(CostModelKind kind) {
  switch (kind) {
    case CostModelKind::kPayload:
      return "payload";
    case CostModelKind::kMeasured:
      return "measured";
    case CostModelKind::kAffine:
      return "affine";
    case CostModelKind::kPacket:
      break;
  }
  return "packet";
}

std::unique_ptr<CostModel> makeCostModel(const CostModelSpec& spec) {
  const std::optional<CostModelKind> kind = costModelKindNamed(spec.name);
  if (!kind) {
    throw std::invalid_argument("unknown cost model '" + spec.name +
                                "' (expected payload, packet, measured or affine)");
  }
  switch (*kind) {
    case CostModelKind::kPayload:
      return std::make_unique<PayloadCostModel>(spec.header_bytes);
    // "measured" is the packet model whose constants the caller took from its link fit.
    case CostModelKind::kPacket:
    case CostModelKind::kMeasured:
      return std::make_unique<PacketCostModel>(spec.c_fixed, spec.c_packet, spec.packet_bytes);
    case CostModelKind::kAffine:
      return std::make_unique<AffineCostModel>(spec.c_fixed, spec.c_byte);
  }
  return nullptr;
}

}  // namespace tern::costmodel
