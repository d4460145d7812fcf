#include <cmath>
#include <stdexcept>

#include "common/compression/compressor_support.hpp"
#include "common/compression/compressors.hpp"
#include "common/compression/message_encoding.hpp"

namespace tern::compression {

QsgdCompressor::QsgdCompressor(uint32_t levels) : levels_(levels) {
  if (levels < 1 || levels > wire::kMaxQsgdLevels)
    throw std::invalid_argument("qsgd: levels must be in [1, 65535]");
}

Compressed QsgdCompressor::compress(std::span<const float> g, uint32_t, Rng& rng) {
  const uint32_t d = detail::checkedDim(g, "qsgd");
  double sq[4] = {0, 0, 0, 0};
  size_t j = 0;
  for (; j + 4 <= d; j += 4)
    for (size_t u = 0; u < 4; ++u) sq[u] += double(g[j + u]) * double(g[j + u]);
  for (; j < d; ++j) sq[0] += double(g[j]) * double(g[j]);
  const double norm2 = (sq[0] + sq[1]) + (sq[2] + sq[3]);
  if (!std::isfinite(norm2)) throw std::invalid_argument("qsgd: gradient holds a non-finite value");
  // The receiver multiplies by the float norm, so the levels are rounded against that same
  // float: E[norm_f * l_j / s] = |g_j| exactly up to the final float rounding.
  const float norm = float(std::sqrt(norm2));
  if (!std::isfinite(norm)) throw std::invalid_argument("qsgd: gradient norm overflows float");

  wire::Header h;
  h.scheme = wire::Scheme::kQsgd;
  h.coding = wire::IndexCoding::kDense;
  h.dim = d;
  h.count = d;
  h.scale = norm;
  h.qsgd_levels = levels_;
  const unsigned width = wire::qsgdBitsPerLevel(levels_);
  Compressed c;
  const size_t at = wire::startMessage(
      c.bytes, h, 0, wire::valueBytes(wire::ValueCoding::kQsgdLevels, d, levels_));
  wire::BitWriter out(c.bytes.data() + at);
  std::vector<float> decoded(d);
  detail::CoinStream coins(rng);
  const double per_unit = norm > 0.0f ? double(levels_) / double(norm) : 0.0;
  const int32_t s = int32_t(levels_);
  for (uint32_t i = 0; i < d; ++i) {
    const double r = std::fabs(double(g[i])) * per_unit;
    double whole = std::floor(r);
    int32_t level = int32_t(whole);
    if (level < s && coins.uniform() < r - whole) ++level;
    if (level > s) level = s;
    const int32_t signed_level = std::signbit(g[i]) ? -level : level;
    out.put(uint32_t(signed_level + s), width);
    decoded[i] = wire::qsgdValue(norm, signed_level, levels_);
  }
  out.finish();
  wire::finishMessage(c.bytes);
  c.decoded = wire::canonicalGradient(d, {}, std::move(decoded));
  return c;
}

size_t QsgdCompressor::encodedBytes(uint32_t dim, uint32_t) const {
  wire::Header h;
  h.scheme = wire::Scheme::kQsgd;
  h.dim = dim;
  h.count = dim;
  h.qsgd_levels = levels_;
  return wire::headerBytes(h) +
         size_t(wire::valueBytes(wire::ValueCoding::kQsgdLevels, dim, levels_));
}

}  // namespace tern::compression
