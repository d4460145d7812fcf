#include <stdexcept>

#include "common/compression/compressors.hpp"

namespace tern::compression {

std::unique_ptr<Compressor> makeCompressor(const CompressorSpec& spec) {
  if (spec.name == "identity") return std::make_unique<IdentityCompressor>();
  if (spec.name == "fp16") return std::make_unique<Fp16Compressor>();
  if (spec.name == "topk") return std::make_unique<TopKCompressor>();
  if (spec.name == "randomk") return std::make_unique<RandomKCompressor>();
  if (spec.name == "threshold") return std::make_unique<ThresholdCompressor>(spec.threshold);
  if (spec.name == "sq") return std::make_unique<SqCompressor>();
  if (spec.name == "stochastic") return std::make_unique<StochasticCompressor>();
  if (spec.name == "qsgd") return std::make_unique<QsgdCompressor>(spec.qsgd_levels);
  throw std::invalid_argument("unknown compressor '" + spec.name + "'");
}

std::vector<std::string> compressorNames() {
  return {"identity", "fp16", "topk", "randomk", "threshold", "sq", "stochastic", "qsgd"};
}

}  // namespace tern::compression
