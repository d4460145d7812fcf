// Byte features (IDX pixels kept as bytes) against the floats the IDX reader made of them before:
// every minibatch, loss, gradient, accuracy and smoothness must be the same, bit for bit.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "common/util/rng.hpp"
#include "test_support.hpp"

using namespace tern::ml;
using namespace tern::ml::testing;

namespace {

// Random pixels (half of them 0, as in Fashion-MNIST) and labels, stored as readIdxRows does.
Dataset randomBytes(size_t rows, size_t features, int32_t classes, uint64_t seed) {
  tern::Rng rng(seed);
  Dataset d;
  d.is_bytes = true;
  d.byte_scale = 1.0f / 255;
  d.num_classes = classes;
  d.bytes = ByteRows(features);
  std::vector<uint8_t> row(features);
  for (size_t i = 0; i < rows; ++i) {
    for (auto& v : row) v = rng() % 2 ? uint8_t(rng() & 0xff) : 0;
    d.bytes.append(row);
    d.labels.push_back(int32_t(rng() % uint64_t(classes)));
  }
  return d;
}

// The same rows as floats, made by the expression the IDX reader used to fill its float matrix.
Dataset asReaderFloats(const Dataset& bytes) {
  Dataset d;
  d.num_classes = bytes.num_classes;
  d.labels = bytes.labels;
  d.dense.resize(Eigen::Index(bytes.rows()), Eigen::Index(bytes.features()));
  for (size_t i = 0; i < bytes.rows(); ++i) {
    for (size_t j = 0; j < bytes.features(); ++j) {
      d.dense(Eigen::Index(i), Eigen::Index(j)) =
          static_cast<float>(bytes.bytes.at(i, j)) * (1.0f / 255);
    }
  }
  return d;
}

bool sameBits(const DenseMatrix& a, const DenseMatrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), size_t(a.size()) * sizeof(float)) == 0;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<size_t> randomRows(size_t count, size_t n, uint64_t seed) {
  tern::Rng rng(seed);
  std::vector<size_t> rows(count);
  for (auto& r : rows) r = size_t(rng() % n);
  return rows;
}

}  // namespace

TEST_CASE("a minibatch gathered from byte features equals the reader's float rows bit for bit") {
  const Dataset bytes = randomBytes(300, 29, 5, 1);
  const Dataset floats = asReaderFloats(bytes);
  Dataset batch, want;
  for (uint64_t seed : {2, 3, 4}) {
    const auto rows = randomRows(64, bytes.rows(), seed);
    bytes.gatherInto(rows, batch);
    floats.gatherInto(rows, want);
    CHECK_FALSE(batch.is_bytes);
    CHECK(batch.bytes.rows() == 0);
    CHECK(batch.labels == want.labels);
    CHECK(sameBits(batch.dense, want.dense));
  }
  CHECK(sameBits(withFloatFeatures(bytes).dense, floats.dense));
  CHECK(withFloatFeatures(bytes).features() == 29);
}

TEST_CASE("ByteRows gives back every row it was given, zeros and all") {
  tern::Rng rng(11);
  // 20 columns (a partial mask byte); rows all zero, all non-zero, and mixed; enough rows to
  // fill more than one storage block.
  ByteRows rows(20);
  std::vector<std::vector<uint8_t>> want;
  for (size_t i = 0; i < 30000; ++i) {
    std::vector<uint8_t> row(20);
    for (auto& v : row) v = i % 3 == 0 ? 0 : i % 3 == 1 ? uint8_t(1 + rng() % 255) : uint8_t(rng());
    rows.append(row);
    want.push_back(row);
  }
  REQUIRE(rows.rows() == want.size());
  ByteRows copy(20);
  for (size_t i = want.size(); i-- > 0;) copy.appendRowOf(rows, i);
  std::vector<uint8_t> got(20);
  for (size_t i = 0; i < want.size(); ++i) {
    rows.unpack(i, got);
    CHECK(got == want[i]);
    copy.unpack(want.size() - 1 - i, got);
    CHECK(got == want[i]);
    for (size_t c = 0; c < 20; c += 7) CHECK(rows.at(i, c) == want[i][c]);
  }
  CHECK_THROWS_AS(rows.append(std::vector<uint8_t>(19)), std::invalid_argument);
}

TEST_CASE("ByteRows holds little more than its non-zero bytes, for a few rows as for many") {
  // A simulated fleet of thousands of workers holds thousands of small shards: each must not
  // cost a whole large block.
  tern::Rng rng(5);
  for (size_t n : {1, 3, 50, 700, 20000}) {
    CAPTURE(n);
    ByteRows rows(784);
    size_t non_zero = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<uint8_t> row(784);
      for (auto& v : row) v = rng() % 2 ? uint8_t(1 + rng() % 255) : 0;
      for (uint8_t v : row) non_zero += v != 0;
      rows.append(row);
    }
    CHECK(rows.valueCapacity() >= non_zero);
    CHECK(rows.valueCapacity() <= 2 * non_zero + 4096);
  }
}

TEST_CASE("subset of byte features keeps bytes, the same rows") {
  const Dataset bytes = randomBytes(50, 7, 3, 5);
  const std::vector<size_t> rows{9, 0, 9, 49};
  const Dataset s = bytes.subset(rows);
  REQUIRE(s.is_bytes);
  CHECK(s.dense.size() == 0);
  CHECK(s.features() == 7);
  std::vector<uint8_t> got(7), want(7);
  CHECK(s.byte_scale == bytes.byte_scale);
  CHECK(s.num_classes == bytes.num_classes);
  for (size_t k = 0; k < rows.size(); ++k) {
    CHECK(s.labels[k] == bytes.labels[rows[k]]);
    s.bytes.unpack(k, got);
    bytes.bytes.unpack(rows[k], want);
    CHECK(got == want);
  }
  const std::vector<size_t> bad{50};
  CHECK_THROWS_AS(bytes.subset(bad), std::out_of_range);
}

TEST_CASE("models give byte and float features the same loss, gradient and accuracy, exactly") {
  // 4,500 rows: more than one chunk of the chunked functions and of the smoothness pass, whose
  // last chunk is partial.
  const Dataset bytes = randomBytes(4500, 13, 4, 6);
  const Dataset floats = asReaderFloats(bytes);
  for (const char* kind : {"softmax", "logistic", "mlp"}) {
    CAPTURE(kind);
    const auto model = makeModel({.kind = kind,
                                  .features = 13,
                                  .classes = 4,
                                  .hidden = 5,
                                  .l2 = 0,
                                  .tensors = {},
                                  .initial = {}});
    const Dataset b = std::string(kind) == "logistic" ? toBinary(bytes, std::vector{1}) : bytes;
    const Dataset f = std::string(kind) == "logistic" ? toBinary(floats, std::vector{1}) : floats;
    const auto params = gaussianParams(model->numParams(), 0.3, 7);
    const auto rows = randomRows(700, b.rows(), 8);
    std::vector<float> gb(params.size()), gf(params.size()), chunk(params.size());
    Dataset scratch;
    const auto lb = chunkedLossAndGradient(*model, params, b, rows, 256, scratch, chunk, gb);
    const auto lf = chunkedLossAndGradient(*model, params, f, rows, 256, scratch, chunk, gf);
    REQUIRE(lb.has_value());
    CHECK(*lb == *lf);
    CHECK(sameBits(gb, gf));
    CHECK(model->lossAndGradient(params, b, rows, gb) ==
          model->lossAndGradient(params, f, rows, gf));
    CHECK(sameBits(gb, gf));
    CHECK(model->loss(params, b) == model->loss(params, f));
    CHECK(model->accuracy(params, b) == model->accuracy(params, f));
    CHECK(chunkedAccuracy(*model, params, b, 1000, scratch) ==
          chunkedAccuracy(*model, params, f, 1000, scratch));
    CHECK(model->smoothness(b) == model->smoothness(f));
  }
}

TEST_CASE("readIdxRows keeps the file's pixel bytes, readIdx the reader's floats") {
  ScratchDir dir("idx_bytes");
  auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff),
                       char(v & 0xff)};
  };
  const uint32_t n = 40;
  std::string images = be32(0x00000803) + be32(n) + be32(3) + be32(5);
  std::string labels = be32(0x00000801) + be32(n);
  tern::Rng rng(9);
  for (uint32_t i = 0; i < n * 15; ++i) images.push_back(char(rng() % 2 ? rng() & 0xff : 0));
  for (uint32_t i = 0; i < n; ++i) labels.push_back(char(i % 6));
  const std::string img = dir.write("img", images), lbl = dir.write("lbl", labels);
  const std::vector<size_t> picked{31, 2, 31, 39, 0};
  const Dataset d =
      readIdxRows(img, lbl, [&](std::span<const int32_t>, int32_t) { return picked; });
  REQUIRE(d.is_bytes);
  CHECK(d.byte_scale == 1.0f / 255);
  CHECK(d.num_classes == 6);
  REQUIRE(d.rows() == picked.size());
  for (size_t k = 0; k < picked.size(); ++k) {
    CHECK(d.labels[k] == int32_t(picked[k] % 6));
    for (Eigen::Index j = 0; j < 15; ++j) {
      CHECK(d.bytes.at(k, size_t(j)) == uint8_t(images[16 + picked[k] * 15 + size_t(j)]));
    }
  }
  const Dataset all = readIdx(img, lbl);
  CHECK_FALSE(all.is_bytes);
  CHECK(sameBits(all.dense, asReaderFloats(readIdxRows(img, lbl, everyRow)).dense));
}
