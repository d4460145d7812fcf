#include <algorithm>
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

namespace {

// ||g||_2 as the float the receiver multiplies by. The levels are rounded against that same
// float: E[norm_f * l_j / s] = |g_j| exactly up to the final float rounding.
float qsgdNorm(std::span<const float> g, uint32_t d) {
  double sq[4] = {0, 0, 0, 0};
  size_t j = 0;
  for (; j + 4 <= d; j += 4)
    for (size_t u = 0; u < 4; ++u) sq[u] += double(g[j + u]) * double(g[j + u]);
  for (; j < d; ++j) sq[0] += double(g[j]) * double(g[j]);
  const double norm2 = (sq[0] + sq[1]) + (sq[2] + sq[3]);
  if (!std::isfinite(norm2)) throw std::invalid_argument("qsgd: gradient holds a non-finite value");
  const float norm = float(std::sqrt(norm2));
  if (!std::isfinite(norm)) throw std::invalid_argument("qsgd: gradient norm overflows float");
  return norm;
}

// Stochastic rounding of |x| * levels / norm to a level in [0, levels], sent as the signed level
// plus levels. Below a norm of about levels / FLT_MAX, levels / norm overflows float: such a
// gradient is scaled in double (|g_j| / norm <= 1, so r stays in [0, levels]).
class LevelRounding {
 public:
  LevelRounding(float norm, uint32_t levels)
      : per_unit_(norm > 0.0f ? float(levels) / norm : 0.0f),
        tiny_(!std::isfinite(per_unit_)),
        per_unit_d_(norm > 0.0f ? double(levels) / double(norm) : 0.0),
        s_(int32_t(levels)) {}

  // Rounding up with probability frac(r) makes E[level] = r; `coin` is uniform in [0, 1).
  uint32_t symbol(float x, float coin) const {
    const float r = tiny_ ? float(std::min(double(std::fabs(x)) * per_unit_d_, double(s_)))
                          : std::fabs(x) * per_unit_;
    int32_t level = int32_t(r);  // r >= 0: truncation is the floor
    level += int32_t(coin < r - float(level));
    level = std::min(level, s_);
    const int32_t signed_level = (wire::floatBits(x) >> 31) ? -level : level;
    return uint32_t(signed_level + s_);
  }

 private:
  float per_unit_;
  bool tiny_;
  double per_unit_d_;
  int32_t s_;
};

}  // namespace

Compressed QsgdCompressor::compress(std::span<const float> g, uint32_t, Rng& rng) {
  const uint32_t d = detail::checkedDim(g, "qsgd");
  const float norm = qsgdNorm(g, d);
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
  std::vector<float> decoded(d);
  const wire::QsgdTable table(norm, levels_, d);
  detail::CoinStream coin_stream(rng);
  const LevelRounding rounding(norm, levels_);
  // Blocks of kBlock coordinates keep the coins and symbols in small buffers (no large
  // temporaries to fault in per call); kBlock * width bits is a whole number of bytes, so each
  // block packs on its own.
  constexpr uint32_t kBlock = 4096;
  float coins[kBlock];
  uint32_t symbols[kBlock];
  for (uint32_t base = 0; base < d; base += kBlock) {
    const uint32_t n = std::min(kBlock, d - base);
    // 24-bit uniforms resolve the rounding probability as finely as r itself is resolved in
    // float.
    coin_stream.fill24(std::span(coins, n));
    for (uint32_t i = 0; i < n; ++i) symbols[i] = rounding.symbol(g[base + i], coins[i]);
    for (uint32_t i = 0; i < n; ++i) decoded[base + i] = table.value(symbols[i]);
    wire::packFixed(symbols, n, width, c.bytes.data() + at + size_t(base / 8) * width);
  }
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
