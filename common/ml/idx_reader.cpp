// IDX files (the MNIST family): a 4-byte magic (0, 0, type, ndims), ndims big-endian uint32
// sizes, then the data. Only unsigned-byte data is used by these datasets. gzopen reads plain
// files transparently, so one code path serves both .gz and uncompressed files.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/detail/input_file.hpp"
#include "common/ml/model.hpp"

namespace tern::ml {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
// A sanity cap so a corrupted header cannot make us allocate without bound before reading.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 34;
// zlib's buffers per open file: this much compressed input and twice as much output. Rows are
// read a few hundred bytes at a time, so larger buffers only add to a small device's peak memory.
constexpr unsigned kGzBufferBytes = 64u << 10;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("IDX file '" + path + "': " + what);
}

class IdxStream {
 public:
  explicit IdxStream(const std::string& path) : path_(path), file_(openFile(path)) {
    gzbuffer(file_.get(), kGzBufferBytes);
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

  // Checks that `bytes` more bytes follow the current position, without reading them into
  // memory (a seek, emulated by zlib for gzip files), so that a header declaring more data than
  // the file holds is refused before anything is allocated for it.
  void requireData(uint64_t bytes, const char* what) {
    if (bytes == 0) return;
    const z_off_t here = gztell(file_.get());
    const uint64_t last = uint64_t(here) + bytes - 1;
    uint8_t byte = 0;
    if (here < 0 || last > uint64_t(std::numeric_limits<z_off_t>::max()) ||
        gzseek(file_.get(), z_off_t(last), SEEK_SET) < 0 || gzread(file_.get(), &byte, 1) != 1) {
      fail(path_, std::string("truncated ") + what + " (the header declares " +
                      std::to_string(bytes) + " bytes)");
    }
    if (gzseek(file_.get(), here, SEEK_SET) != here)
      fail(path_, std::string("read error: ") + zlibError());
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
  static GzFile openFile(const std::string& path) {
    if (const std::string why = detail::whyNotAFile(path); !why.empty()) fail(path, why);
    GzFile file(gzopen(path.c_str(), "rb"));
    if (!file) fail(path, "cannot open");
    return file;
  }
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

namespace {

struct IdxHeader {
  size_t n = 0;
  size_t features = 0;
};

// The row count a header declares is checked before anything is kept per row: a few kilobytes
// of gzip can declare millions of 1x1 images, whose bookkeeping would cost ~40 bytes each.
void requireRowCount(const IdxStream& in, uint32_t rows) {
  if (rows > kMaxIdxRows) {
    fail(in.path(), "the header declares " + std::to_string(rows) + " rows, more than the " +
                        std::to_string(kMaxIdxRows) + " an IDX file may hold");
  }
}

// Opens both files, checks their headers agree, and reads every label.
IdxHeader openIdx(IdxStream& images_in, IdxStream& labels_in, const std::string& images_path,
                  const std::string& labels_path, std::vector<uint8_t>& label_bytes) {
  const auto label_dims = labels_in.readHeader(1);
  requireRowCount(labels_in, label_dims[0]);
  const auto image_dims = images_in.readHeader(3);
  requireRowCount(images_in, image_dims[0]);
  if (image_dims[0] != label_dims[0]) {
    throw std::runtime_error("IDX files '" + images_path + "' and '" + labels_path +
                             "': count mismatch (" + std::to_string(image_dims[0]) + " images, " +
                             std::to_string(label_dims[0]) + " labels)");
  }
  if (image_dims[0] == 0) {
    throw std::runtime_error("IDX files '" + images_path + "' and '" + labels_path +
                             "': no rows (both headers declare 0)");
  }
  IdxHeader h;
  h.n = image_dims[0];
  h.features = size_t{image_dims[1]} * image_dims[2];
  if (h.features == 0) {
    throw std::runtime_error("IDX file '" + images_path + "': images have zero pixels");
  }
  if (h.features > kMaxFeatures) {
    throw std::runtime_error("IDX file '" + images_path + "': images of " +
                             std::to_string(h.features) + " pixels, more than a model takes (" +
                             std::to_string(kMaxFeatures) + ")");
  }
  labels_in.requireData(h.n, "label data");
  images_in.requireData(uint64_t(h.n) * h.features, "image data");
  label_bytes.resize(h.n);
  labels_in.readExact(label_bytes, "label data");
  labels_in.expectEnd();
  return h;
}

int32_t classesOf(const std::vector<uint8_t>& label_bytes) {
  return label_bytes.empty() ? 0 : 1 + *std::max_element(label_bytes.begin(), label_bytes.end());
}

// Where each picked file row goes, (file row, output row) in file order, so that the images
// stream through once.
std::vector<std::pair<size_t, size_t>> inFileOrder(const std::vector<size_t>& rows, size_t n,
                                                   const std::string& images_path) {
  std::vector<std::pair<size_t, size_t>> wanted;
  wanted.reserve(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] >= n) {
      throw std::out_of_range("IDX file '" + images_path + "': row " + std::to_string(rows[k]) +
                              " out of range (" + std::to_string(n) + " rows)");
    }
    wanted.emplace_back(rows[k], k);
  }
  std::sort(wanted.begin(), wanted.end());
  return wanted;
}

// Rows read in file order (the k-th is picked as wanted[k].second) put in pick order. A shard's
// rows are picked in file order, and then nothing moves.
ByteRows inPickOrder(ByteRows in_file_order, const std::vector<std::pair<size_t, size_t>>& wanted) {
  std::vector<size_t> slot(wanted.size());
  bool ordered = true;
  for (size_t k = 0; k < wanted.size(); ++k) {
    slot[wanted[k].second] = k;
    ordered = ordered && wanted[k].second == k;
  }
  if (ordered) return in_file_order;
  ByteRows out(in_file_order.cols());
  out.reserve(wanted.size());
  for (size_t k : slot) out.appendRowOf(in_file_order, k);
  return out;
}

}  // namespace

std::vector<size_t> everyRow(std::span<const int32_t> labels, int32_t /*num_classes*/) {
  std::vector<size_t> all(labels.size());
  std::iota(all.begin(), all.end(), size_t{0});
  return all;
}

Dataset readIdx(const std::string& images_path, const std::string& labels_path) {
  return withFloatFeatures(readIdxRows(images_path, labels_path, everyRow));
}

Dataset readIdxRows(const std::string& images_path, const std::string& labels_path,
                    const RowPicker& pick) {
  IdxStream labels_in(labels_path);
  IdxStream images_in(images_path);
  std::vector<uint8_t> label_bytes;
  const IdxHeader h = openIdx(images_in, labels_in, images_path, labels_path, label_bytes);
  const int32_t classes = classesOf(label_bytes);
  std::vector<size_t> rows;
  {
    const std::vector<int32_t> labels(label_bytes.begin(), label_bytes.end());
    rows = pick(labels, classes);
  }
  const auto wanted = inFileOrder(rows, h.n, images_path);

  // The picked rows in file order, each as often as it is picked.
  ByteRows in_file_order(h.features);
  in_file_order.reserve(rows.size());
  std::vector<uint8_t> pixels(h.features);
  for (size_t i = 0, next = 0; i < h.n; ++i) {
    images_in.readExact(pixels, "image data");
    for (; next < wanted.size() && wanted[next].first == i; ++next) in_file_order.append(pixels);
  }
  images_in.expectEnd();

  Dataset out;
  out.is_bytes = true;
  out.byte_scale = 1.0f / 255;
  out.num_classes = classes;
  out.labels.reserve(rows.size());
  for (size_t r : rows) out.labels.push_back(label_bytes[r]);
  out.bytes = inPickOrder(std::move(in_file_order), wanted);
  return out;
}

}  // namespace tern::ml
