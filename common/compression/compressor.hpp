#pragma once
// Gradient compressors (docs/cat.md and docs/dagc.md, method): one interface for the whole family.
// compress() returns the encoded wire bytes together with the exact vector the receiver will
// decode from them, so error feedback (error_feedback.hpp) can keep e <- e + g - C(e + g)
// without decoding its own message. decode() (codec.hpp) reads any scheme strictly.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/util/rng.hpp"

namespace tern::compression {

// A decoded gradient: sparse (indices strictly increasing) or dense (indices empty and
// values.size() == dim).
struct SparseGradient {
  uint32_t dim = 0;
  std::vector<uint32_t> indices;
  std::vector<float> values;
  bool isDense() const { return indices.empty() && values.size() == dim && dim > 0; }
  size_t nonZeros() const { return isDense() ? dim : indices.size(); }
};

// out += weight * g (out.size() must equal g.dim).
void addScaled(const SparseGradient& g, float weight, std::span<float> out);
// Whether addScaled(g, weight, out) would leave every value it touches finite (g's own values
// and out's included); nothing is changed.
bool staysFinite(const SparseGradient& g, float weight, std::span<const float> out);
// addScaled(g, weight, out) when it leaves every value it touches finite, with the same bits;
// else out is left as it was and false is returned. A sparse g is applied in one pass over the
// coordinates it touches (their old values kept in `saved`, put back on failure).
bool addScaledIfFinite(const SparseGradient& g, float weight, std::span<float> out,
                       std::vector<float>& saved);
// Dense copy of g.
std::vector<float> toDense(const SparseGradient& g);

struct Compressed {
  std::vector<uint8_t> bytes;  // the wire form
  SparseGradient decoded;  // exactly what decode(bytes) yields (see Compressor::setDecodedWanted)
};

// The members of the family, one per name of compressorNames().
enum class CompressorKind {
  kIdentity,
  kFp16,
  kTopK,
  kRandomK,
  kThreshold,
  kSq,
  kStochastic,
  kQsgd
};

// The kind named `name` (compressorNames()), or nullopt.
std::optional<CompressorKind> compressorKindNamed(const std::string& name);

struct CompressorSpec {
  std::string name =
      "topk";              // identity | fp16 | topk | randomk | threshold | sq | stochastic | qsgd
  double threshold = 0.0;  // hard threshold lambda (threshold)
  uint32_t qsgd_levels = 16;  // s (qsgd)
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual std::string name() const = 0;
  virtual CompressorKind kind() const = 0;
  // `level` is the scheme's knob: coordinates kept for the sparsifiers (k or T, clamped to
  // [1, dim]); expected coordinates for stochastic sparsification; for the hard threshold the
  // most coordinates a push may carry (the largest of those at or above lambda when more pass;
  // 0 = no limit); ignored by identity, fp16 and qsgd.
  virtual Compressed compress(std::span<const float> g, uint32_t level, Rng& rng) = 0;
  // Predicted size of compress(g, level) in bytes for a gradient of dimension dim, without
  // compressing (the tuner needs it). Exact where the size does not depend on the data.
  // topk, randomk, sq: an upper bound that holds for every index set (wire_format.hpp,
  // indexBytesBound), within a few percent of the size for uniformly spread indices.
  // threshold, stochastic: the size at `level` coordinates sent (the expected count).
  virtual size_t encodedBytes(uint32_t dim, uint32_t level) const = 0;
  // True when `level` changes what is sent (the sparsifiers); false for fixed schemes.
  virtual bool hasLevel() const = 0;
  // True when a push at `level` carries at most about `level` coordinates, so that
  // encodedBytes(dim, level) bounds its size: every sparsifier, and the hard threshold, whose
  // level is only a limit.
  virtual bool levelLimitsCount() const { return hasLevel(); }
  // Whether compress() fills Compressed::decoded (by default it does). An owner that never reads
  // it (a push without error feedback) says so, and a compressor whose decoded form is a
  // model-sized copy of its input (identity) then leaves it empty.
  void setDecodedWanted(bool wanted) { decoded_wanted_ = wanted; }
  bool decodedWanted() const { return decoded_wanted_; }

 private:
  bool decoded_wanted_ = true;
};

// Throws std::invalid_argument on an unknown name or bad parameters.
std::unique_ptr<Compressor> makeCompressor(const CompressorSpec& spec);
std::vector<std::string> compressorNames();

}  // namespace tern::compression
