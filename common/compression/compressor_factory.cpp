#include <stdexcept>
#include <utility>

#include "common/compression/compressors.hpp"

namespace tern::compression {

namespace {

// Every compressor's name and kind, in compressorNames() order.
constexpr std::pair<const char*, CompressorKind> kNames[] = {
    {"identity", CompressorKind::kIdentity},
    {"fp16", CompressorKind::kFp16},
    {"topk", CompressorKind::kTopK},
    {"randomk", CompressorKind::kRandomK},
    {"threshold", CompressorKind::kThreshold},
    {"sq", CompressorKind::kSq},
    {"stochastic", CompressorKind::kStochastic},
    {"qsgd", CompressorKind::kQsgd}};

}  // namespace

std::optional<CompressorKind> compressorKindNamed(const std::string& name) {
  for (const auto& [n, kind] : kNames) {
    if (name == n) return kind;
  }
  return std::nullopt;
}

std::unique_ptr<Compressor> makeCompressor(const CompressorSpec& spec) {
  const std::optional<CompressorKind> kind = compressorKindNamed(spec.name);
  if (!kind) throw std::invalid_argument("unknown compressor '" + spec.name + "'");
  switch (*kind) {
    case CompressorKind::kIdentity:
      return std::make_unique<IdentityCompressor>();
    case CompressorKind::kFp16:
      return std::make_unique<Fp16Compressor>();
    case CompressorKind::kTopK:
      return std::make_unique<TopKCompressor>();
    case CompressorKind::kRandomK:
      return std::make_unique<RandomKCompressor>();
    case CompressorKind::kThreshold:
      return std::make_unique<ThresholdCompressor>(spec.threshold);
    case CompressorKind::kSq:
      return std::make_unique<SqCompressor>();
    case CompressorKind::kStochastic:
      return std::make_unique<StochasticCompressor>();
    case CompressorKind::kQsgd:
      return std::make_unique<QsgdCompressor>(spec.qsgd_levels);
  }
  throw std::invalid_argument("unknown compressor '" + spec.name + "'");
}

std::vector<std::string> compressorNames() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : kNames) names.emplace_back(name);
  return names;
}

}  // namespace tern::compression
