// IDX files (the MNIST family): a 4-byte magic (0, 0, type, ndims), ndims big-endian uint32
// sizes, then the data. Only unsigned-byte data is used by these datasets. gzopen reads plain
// files transparently, so one code path serves both .gz and uncompressed files.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"

namespace tern::ml {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
// A sanity cap so a corrupted header cannot make us allocate without bound before reading.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 34;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("IDX file '" + path + "': " + what);
}

class IdxStream {
 public:
  explicit IdxStream(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) fail(path_, "cannot open");
    gzbuffer(file_.get(), 1 << 20);
  }

  // Reads exactly out.size() bytes or throws "truncated" (or the zlib error, for corrupt gzip).
  void readExact(std::span<uint8_t> out, const char* what) {
    size_t done = 0;
    while (done < out.size()) {
      const auto chunk = static_cast<unsigned>(std::min<size_t>(out.size() - done, 1u << 30));
      const int got = gzread(file_.get(), out.data() + done, chunk);
      if (got < 0) fail(path_, std::string("read error: ") + zlibError());
      if (got == 0) {
        fail(path_, std::string("truncated ") + what + " (got " + std::to_string(done) + " of " +
                        std::to_string(out.size()) + " bytes)");
      }
      done += static_cast<size_t>(got);
    }
  }

  void expectEnd() {
    uint8_t extra = 0;
    const int got = gzread(file_.get(), &extra, 1);
    if (got < 0) fail(path_, std::string("read error: ") + zlibError());
    if (got > 0) fail(path_, "trailing bytes after the declared data");
  }

  // Parses the header, checks magic and dimension count, and returns the sizes.
  std::vector<uint32_t> readHeader(uint8_t expected_dims) {
    std::array<uint8_t, 4> magic{};
    readExact(magic, "header");
    if (magic[0] != 0 || magic[1] != 0) fail(path_, "bad magic number");
    if (magic[2] != kUnsignedByte) {
      fail(path_, "unsupported data type 0x" + hex(magic[2]) + " (only unsigned byte)");
    }
    if (magic[3] != expected_dims) {
      fail(path_, "expected " + std::to_string(expected_dims) + " dimensions, header says " +
                      std::to_string(magic[3]));
    }
    std::vector<uint32_t> dims(expected_dims);
    uint64_t total = 1;
    for (auto& d : dims) {
      std::array<uint8_t, 4> b{};
      readExact(b, "header");
      d = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
      total *= d;
      if (total > kMaxIdxBytes) fail(path_, "declared size is implausibly large");
    }
    return dims;
  }

  const std::string& path() const { return path_; }

 private:
  static std::string hex(uint8_t v) {
    const char* digits = "0123456789abcdef";
    return {digits[v >> 4], digits[v & 15]};
  }
  std::string zlibError() {
    int code = 0;
    const char* msg = gzerror(file_.get(), &code);
    return msg ? msg : "unknown";
  }

  std::string path_;
  GzFile file_;
};

}  // namespace

Dataset readIdx(const std::string& images_path, const std::string& labels_path) {
  IdxStream labels_in(labels_path);
  const auto label_dims = labels_in.readHeader(1);
  IdxStream images_in(images_path);
  const auto image_dims = images_in.readHeader(3);
  if (image_dims[0] != label_dims[0]) {
    throw std::runtime_error("IDX files '" + images_path + "' and '" + labels_path +
                             "': count mismatch (" + std::to_string(image_dims[0]) + " images, " +
                             std::to_string(label_dims[0]) + " labels)");
  }
  const size_t n = image_dims[0];
  const size_t features = size_t{image_dims[1]} * image_dims[2];
  if (features == 0) {
    throw std::runtime_error("IDX file '" + images_path + "': images have zero pixels");
  }
  std::vector<uint8_t> label_bytes(n);
  labels_in.readExact(label_bytes, "label data");
  labels_in.expectEnd();

  std::vector<uint8_t> pixels(n * features);
  images_in.readExact(pixels, "image data");
  images_in.expectEnd();

  Dataset out;
  out.is_sparse = false;
  out.labels.assign(label_bytes.begin(), label_bytes.end());
  out.num_classes = n == 0 ? 0 : 1 + *std::max_element(label_bytes.begin(), label_bytes.end());
  out.dense.resize(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(features));
  float* dst = out.dense.data();
  for (size_t i = 0; i < pixels.size(); ++i) dst[i] = static_cast<float>(pixels[i]) * (1.0f / 255);
  return out;
}

}  // namespace tern::ml
