#include "common/compression/message_encoding.hpp"

#include <cstring>

namespace tern::compression::wire {

SparseGradient canonicalGradient(uint32_t dim, std::vector<uint32_t> indices,
                                 std::vector<float> values) {
  SparseGradient g;
  g.dim = dim;
  if (indices.size() != dim || dim == 0) g.indices = std::move(indices);
  g.values = std::move(values);
  return g;
}

size_t startMessage(std::vector<uint8_t>& out, const Header& h, size_t index_bytes,
                    uint64_t value_bytes) {
  out.clear();
  out.reserve(headerBytes(h) + index_bytes + size_t(value_bytes) + kBitWriterSlack);
  writeHeader(out, h);
  const size_t at = out.size();
  out.resize(at + index_bytes + size_t(value_bytes) + kBitWriterSlack);
  return at;
}

void finishMessage(std::vector<uint8_t>& out) {
  // erase, not resize: a shrinking resize still instantiates the growing path, which GCC then
  // warns about for a size it cannot bound.
  out.erase(out.end() - ptrdiff_t(kBitWriterSlack), out.end());
}

std::vector<uint8_t> encodeFp32(Scheme scheme, uint32_t dim, std::span<const uint32_t> indices,
                                std::span<const float> values) {
  std::vector<uint8_t> out;
  encodeFp32Into(out, scheme, dim, indices, values);
  return out;
}

void encodeFp32Into(std::vector<uint8_t>& out, Scheme scheme, uint32_t dim,
                    std::span<const uint32_t> indices, std::span<const float> values) {
  const bool dense = indices.empty() && values.size() == dim;
  IndexPlan plan = dense ? IndexPlan{IndexCoding::kDense, 0, 0} : planIndices(dim, indices);
  Header h;
  h.scheme = scheme;
  h.coding = plan.coding;
  h.dim = dim;
  h.count = uint32_t(values.size());
  out.clear();
  // Only the index section goes through a zeroed buffer (the Rice writer needs its slack);
  // the values, most of a message, are appended once.
  out.reserve(headerBytes(h) + plan.bytes + values.size() * 4 + kBitWriterSlack);
  writeHeader(out, h);
  const size_t at = out.size();
  out.resize(at + plan.bytes + kBitWriterSlack);
  writeIndices(out.data() + at, plan, dim, indices);
  finishMessage(out);
  const auto* v = reinterpret_cast<const uint8_t*>(values.data());
  out.insert(out.end(), v, v + values.size() * 4);  // little-endian host
}

std::vector<uint8_t> encodeSigns(uint32_t dim, std::span<const uint32_t> indices,
                                 std::span<const uint8_t> negative, float scale) {
  const IndexPlan plan = planIndices(dim, indices);
  Header h;
  h.scheme = Scheme::kSq;
  h.coding = plan.coding;
  h.dim = dim;
  h.count = uint32_t(indices.size());
  h.scale = scale;
  std::vector<uint8_t> out;
  const uint64_t vbytes = valueBytes(ValueCoding::kSigns, indices.size(), 0);
  const size_t at = startMessage(out, h, plan.bytes, vbytes);
  writeIndices(out.data() + at, plan, dim, indices);
  uint8_t* signs = out.data() + at + plan.bytes;
  for (size_t i = 0; i < negative.size(); ++i)
    signs[i >> 3] |= uint8_t((negative[i] ? 1u : 0u) << (i & 7));
  finishMessage(out);
  return out;
}

}  // namespace tern::compression::wire
