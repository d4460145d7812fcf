#include <stdexcept>

#include "common/compression/compressors.hpp"

namespace tern::compression {

std::unique_ptr<Compressor> makeCompressor(const CompressorSpec& spec) {
  if (spec.name == "identity") return std::make_unique<IdentityCompressor>();
  if (spec.name == "topk") return std::make_unique<TopKCompressor>();
  throw std::invalid_argument("unknown compressor '" + spec.name + "'");
}

std::vector<std::string> compressorNames() { return {"identity", "topk"}; }

}  // namespace tern::compression
