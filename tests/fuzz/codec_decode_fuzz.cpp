// libFuzzer target: the strict gradient decoder (compression::decode) on arbitrary bytes. Beyond
// "no crash, no out-of-bounds read, no UB" (ASan+UBSan), every accepted input must satisfy the
// decoder's documented contract, and using the result the way the coordinator does must be safe.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/compression/codec.hpp"

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

void checkContract(const tern::compression::DecodeResult& r,
                   const tern::compression::DecodeLimits& limits) {
  require(r.value.has_value() != !r.error.empty());
  if (!r.value) return;
  const auto& g = *r.value;
  require(g.dim > 0 && g.dim <= limits.max_dim);
  if (limits.expected_dim) require(g.dim == limits.expected_dim);
  if (g.indices.empty()) {
    // Dense, or a sparse gradient that kept nothing.
    require(g.values.size() == g.dim || g.values.empty());
  } else {
    require(g.indices.size() == g.values.size());
    require(g.indices.size() <= g.dim);
    for (size_t i = 0; i < g.indices.size(); ++i) {
      require(g.indices[i] < g.dim);
      if (i) require(g.indices[i - 1] < g.indices[i]);
    }
  }
  for (float v : g.values) require(std::isfinite(v));
  // What the coordinator does with an accepted gradient.
  std::vector<float> aggregate(g.dim, 0.0f);
  tern::compression::addScaled(g, 0.5f, aggregate);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  // As the coordinator calls it for the quickstart's softmax model (7850 parameters) ...
  tern::compression::DecodeLimits coordinator;
  coordinator.expected_dim = 7850;
  coordinator.max_dim = 7850;
  coordinator.max_bytes = 1u << 20;
  checkContract(tern::compression::decode(bytes, coordinator), coordinator);
  // ... and with only the generic limits, so inputs of any dimension get past the header.
  tern::compression::DecodeLimits generic;
  generic.max_dim = 1u << 16;
  generic.max_bytes = 1u << 20;
  checkContract(tern::compression::decode(bytes, generic), generic);
  return 0;
}
