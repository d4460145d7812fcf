#pragma once
// Communication cost models C(.) for CAT (docs/cat.md, method): what putting a message
// of a given size on the wire costs on one technology. All take the real encoded size in bytes
// (Compressor::encodedBytes), so the tuner prices exactly what the codec sends:
//  - payload: C = 8 * (bytes + header) bits;                                    [paper, payload]
//    it deviates from the paper, which counts T (ceil(log2 d) + 32) bits (paperPayloadBits):
//    docs/cat.md, "Deviations from the paper", says how;
//  - packet:  C = c_fixed + c_packet * ceil((bytes + overhead) / P_max), e.g. seconds, where
//    overhead is what every message carries besides the codec's bytes (envelope, framing);
//                                                                               [paper, packet]
//    the "measured" model is this one with c_fixed, c_packet fitted from a worker's own pushes;
//  - affine:  C = c_fixed + c_byte * bytes (the measured model without packetisation).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace tern::costmodel {

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Cost of one message of `bytes` wire bytes. Non-decreasing in bytes and positive for
  // bytes > 0: the tuner's search relies on both.
  virtual double cost(size_t bytes) const = 0;
  virtual std::string name() const = 0;
  // Payload bytes per packet when the cost is a step function of the size (constant inside a
  // packet); the tuner then only has to look inside the packets that could hold the optimum.
  virtual std::optional<size_t> packetBytes() const { return std::nullopt; }
  // Bytes every message carries besides the codec's (envelope, framing), already inside cost():
  // with packets, they are what the first packet holds before the codec's bytes begin.
  virtual size_t overheadBytes() const { return 0; }
};

class PayloadCostModel final : public CostModel {
 public:
  // header_bytes: framing added to every message (0 counts the codec's bytes only).
  explicit PayloadCostModel(size_t header_bytes = 0);
  double cost(size_t bytes) const override;
  std::string name() const override { return "payload"; }
  size_t overheadBytes() const override { return header_bytes_; }

 private:
  size_t header_bytes_;
};

class PacketCostModel final : public CostModel {
 public:
  // Throws std::invalid_argument unless c_fixed >= 0, c_packet > 0 and packet_bytes > 0.
  PacketCostModel(double c_fixed, double c_packet, size_t packet_bytes = 1448,
                  size_t overhead_bytes = 0);
  double cost(size_t bytes) const override;
  std::string name() const override { return "packet"; }
  std::optional<size_t> packetBytes() const override { return packet_bytes_; }
  size_t overheadBytes() const override { return overhead_bytes_; }

  // Packets a message of `bytes` codec bytes takes, its overhead included.
  size_t packets(size_t bytes) const {
    return (bytes + overhead_bytes_ + packet_bytes_ - 1) / packet_bytes_;
  }
  double fixedCost() const { return c_fixed_; }
  double packetCost() const { return c_packet_; }

 private:
  double c_fixed_;
  double c_packet_;
  size_t packet_bytes_;
  size_t overhead_bytes_;
};

class AffineCostModel final : public CostModel {
 public:
  // Throws std::invalid_argument unless c_fixed >= 0, c_byte > 0.
  AffineCostModel(double c_fixed, double c_byte);
  double cost(size_t bytes) const override;
  std::string name() const override { return "affine"; }

 private:
  double c_fixed_;
  double c_byte_;
};

// Packet model of a link with one-way latency `latency_seconds` and `rate_bits_per_second`:
// c_fixed = latency, c_packet = time to serialise one full frame (payload + per-packet headers;
// 52 = IPv4 + TCP with timestamps, so 1448 + 52 fills a 1500-byte MTU).
PacketCostModel packetModelOfLink(double latency_seconds, double rate_bits_per_second,
                                  size_t packet_bytes = 1448, size_t header_bytes_per_packet = 52);

// The paper's payload count for T coordinates of a d-dimensional vector:
// T * (ceil(log2 d) + bits_per_value) bits (an index and a value per coordinate).
double paperPayloadBits(uint64_t dim, uint64_t coordinates, uint32_t bits_per_value = 32);

// The cost models, one per name CostModelSpec takes.
enum class CostModelKind { kPayload, kPacket, kMeasured, kAffine };

// The kind named `name` (payload | packet | measured | affine), or nullopt.
std::optional<CostModelKind> costModelKindNamed(const std::string& name);
// The configuration's word for `kind`.
const char* costModelKindName(CostModelKind kind);

struct CostModelSpec {
  std::string name = "packet";  // payload | packet | measured | affine
  size_t header_bytes = 0;      // payload
  double c_fixed = 0.005;       // packet, measured, affine
  double c_packet = 0.0015;     // packet, measured
  double c_byte = 1e-6;         // affine
  size_t packet_bytes = 1448;   // packet, measured
};

// Throws std::invalid_argument on an unknown name or bad constants.
std::unique_ptr<CostModel> makeCostModel(const CostModelSpec& spec);

}  // namespace tern::costmodel
