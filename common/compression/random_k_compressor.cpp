#include <bit>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

Compressed RandomKCompressor::compress(std::span<const float> g, uint32_t level, Rng& rng) {
  const uint32_t d = detail::checkedDim(g, "randomk");
  const uint32_t k = detail::clampLevel(level, d);
  // Floyd's algorithm: exactly k draws give a uniformly random k-subset; a bitmap records
  // membership and, scanned word by word, yields the indices already sorted.
  chosen_.assign((size_t(d) + 63) / 64, 0);
  auto has = [&](uint32_t j) { return (chosen_[j >> 6] >> (j & 63)) & 1u; };
  auto add = [&](uint32_t j) { chosen_[j >> 6] |= uint64_t(1) << (j & 63); };
  for (uint64_t j = uint64_t(d) - k; j < d; ++j) {
    const uint32_t t = detail::uniformBelow(rng, uint32_t(j + 1));
    if (has(t))
      add(uint32_t(j));
    else
      add(t);
  }
  std::vector<uint32_t> idx(k);
  size_t o = 0;
  for (size_t w = 0; w < chosen_.size(); ++w) {
    for (uint64_t bits = chosen_[w]; bits != 0; bits &= bits - 1)
      idx[o++] = uint32_t(w * 64 + unsigned(std::countr_zero(bits)));
  }
  const float scale = float(double(d) / double(k));
  std::vector<float> values(k);
  for (size_t i = 0; i < k; ++i) {
    values[i] = g[idx[i]] * scale;
    detail::requireFinite(values[i], "randomk");
  }
  Compressed c;
  c.bytes = wire::encodeFp32(wire::Scheme::kRandomK, d, idx, values);
  c.decoded = wire::canonicalGradient(d, std::move(idx), std::move(values));
  return c;
}

size_t RandomKCompressor::encodedBytes(uint32_t dim, uint32_t level) const {
  return detail::sparseBytesBound(wire::Scheme::kRandomK, dim, detail::clampLevel(level, dim));
}

}  // namespace tern::compression
