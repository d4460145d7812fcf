#include <doctest/doctest.h>
#include <zlib.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/ml/data_source.hpp"
#include "common/ml/dataset.hpp"
#include "test_support.hpp"

using namespace tern::ml;
using namespace tern::ml::testing;

namespace {

std::string bigEndian32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
}

// Three 2x3 images with pixel value 10*i + j, and labels 2, 0, 1.
std::string idxImages(uint32_t count = 3) {
  std::string s = bigEndian32(0x00000803) + bigEndian32(count) + bigEndian32(2) + bigEndian32(3);
  for (uint32_t i = 0; i < 3; ++i) {
    for (uint32_t j = 0; j < 6; ++j) s.push_back(char(10 * i + j));
  }
  return s;
}
std::string idxLabels() { return bigEndian32(0x00000801) + bigEndian32(3) + std::string{2, 0, 1}; }

std::string writeGzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  gzclose(f);
  return path;
}

void checkSmallIdx(const Dataset& d) {
  REQUIRE(d.rows() == 3);
  CHECK_FALSE(d.is_sparse);
  CHECK(d.features() == 6);
  CHECK(d.num_classes == 3);
  CHECK(d.labels == std::vector<int32_t>{2, 0, 1});
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 6; ++j) CHECK(d.dense(i, j) == doctest::Approx((10.0 * i + j) / 255.0));
  }
}

const char* const kFashion = "/usr/share/datasets/fashion-mnist/";

}  // namespace

TEST_CASE("IDX reader reads plain and gzip files and scales pixels to [0, 1]") {
  ScratchDir dir("idx_ok");
  checkSmallIdx(readIdx(dir.write("img", idxImages()), dir.write("lbl", idxLabels())));
  checkSmallIdx(readIdx(writeGzip(dir.file("img.gz"), idxImages()),
                        writeGzip(dir.file("lbl.gz"), idxLabels())));
}

TEST_CASE("IDX reader rejects bad magic, truncation, count mismatch and missing files by name") {
  ScratchDir dir("idx_bad");
  const std::string labels = dir.write("lbl", idxLabels());
  const std::string images = dir.write("img", idxImages());

  std::string bad_magic = idxImages();
  bad_magic[0] = 0x12;
  const std::string bad_magic_path = dir.write("bad_magic", bad_magic);
  std::string msg = runtimeErrorOf([&] { readIdx(bad_magic_path, labels); });
  CHECK(contains(msg, bad_magic_path));
  CHECK(contains(msg, "magic"));

  const std::string wrong_type_path = dir.write("wrong_type", idxLabels());  // 1-D as images
  msg = runtimeErrorOf([&] { readIdx(wrong_type_path, labels); });
  CHECK(contains(msg, wrong_type_path));
  CHECK(contains(msg, "dimensions"));

  const std::string full = idxImages();
  const std::string truncated_path = dir.write("truncated", full.substr(0, full.size() - 1));
  msg = runtimeErrorOf([&] { readIdx(truncated_path, labels); });
  CHECK(contains(msg, truncated_path));
  CHECK(contains(msg, "truncated"));

  const std::string truncated_gz =
      writeGzip(dir.file("truncated.gz"), full.substr(0, full.size() - 4));
  msg = runtimeErrorOf([&] { readIdx(truncated_gz, labels); });
  CHECK(contains(msg, truncated_gz));
  CHECK(contains(msg, "truncated"));

  const std::string header_only = dir.write("header_only", full.substr(0, 6));
  msg = runtimeErrorOf([&] { readIdx(header_only, labels); });
  CHECK(contains(msg, header_only));
  CHECK(contains(msg, "truncated"));

  const std::string trailing = dir.write("trailing", full + "x");
  CHECK(runtimeErrorOf([&] { readIdx(trailing, labels); }) ==
        "IDX file '" + trailing + "': trailing bytes after the declared data");

  const std::string four_images = dir.write("four", idxImages(4));
  msg = runtimeErrorOf([&] { readIdx(four_images, labels); });
  CHECK(contains(msg, four_images));
  CHECK(contains(msg, "mismatch"));

  const std::string missing = dir.file("does_not_exist");
  msg = runtimeErrorOf([&] { readIdx(images, missing); });
  CHECK(contains(msg, missing));
}

TEST_CASE(
    "IDX headers declaring more rows or bytes than allowed or held, or no rows, are refused") {
  // Each from the headers (and the files' lengths), before anything is kept for the data; each
  // for plain and gzip files, with the other file of the pair well-formed where that matters.
  ScratchDir dir("idx_headers");
  const auto labelFile = [](uint32_t count, const std::string& data) {
    return bigEndian32(0x00000801) + bigEndian32(count) + data;
  };
  const auto imageFile = [](uint32_t count, uint32_t height, uint32_t width,
                            const std::string& data) {
    return bigEndian32(0x00000803) + bigEndian32(count) + bigEndian32(height) + bigEndian32(width) +
           data;
  };
  const std::string few_labels = labelFile(3, std::string{2, 0, 1});
  const std::string cap = std::to_string(kMaxIdxRows);
  const uint32_t over = uint32_t(kMaxIdxRows) + 1;
  for (const bool gz : {false, true}) {
    CAPTURE(gz);
    const auto put = [&](const std::string& name, const std::string& bytes) {
      return gz ? writeGzip(dir.file(name + ".gz"), bytes) : dir.write(name, bytes);
    };
    const std::string fl = put("few_lbl", few_labels);

    // Four billion rows: past the row cap, in the labels (read first) or in the images.
    const std::string hl = put("huge_lbl", labelFile(4000000000u, std::string(6, 0)));
    const std::string hi = put("huge_img", imageFile(4000000000u, 1, 1, std::string(6, 1)));
    CHECK(runtimeErrorOf([&] { readIdx(hi, hl); }) ==
          "IDX file '" + hl + "': the header declares 4000000000 rows, more than the " + cap +
              " an IDX file may hold");
    CHECK(runtimeErrorOf([&] { readIdx(hi, fl); }) ==
          "IDX file '" + hi + "': the header declares 4000000000 rows, more than the " + cap +
              " an IDX file may hold");
    // One past the cap is refused; at the cap, the six bytes there are fall short of the header.
    const std::string over_lbl = put("over_lbl", labelFile(over, std::string(6, 0)));
    CHECK(contains(runtimeErrorOf([&] { readIdx(hi, over_lbl); }),
                   "the header declares " + std::to_string(over) + " rows, more than the " + cap));
    const std::string at_cap = put("cap_lbl", labelFile(uint32_t(kMaxIdxRows), std::string(6, 0)));
    const std::string at_cap_img = put("cap_img", imageFile(uint32_t(kMaxIdxRows), 1, 1, ""));
    CHECK(runtimeErrorOf([&] { readIdx(at_cap_img, at_cap); }) ==
          "IDX file '" + at_cap + "': truncated label data (the header declares " + cap +
              " bytes)");

    // Labels all there, images short: by a little, and by 3 x 8192 x 8192 (the widest images).
    const std::string si = put("short_img", imageFile(3, 100, 100, std::string(6, 1)));
    CHECK(runtimeErrorOf([&] { readIdx(si, fl); }) ==
          "IDX file '" + si + "': truncated image data (the header declares 30000 bytes)");
    const std::string wi = put("wide_img", imageFile(3, 8192, 8192, std::string(6, 1)));
    CHECK(runtimeErrorOf([&] { readIdx(wi, fl); }) ==
          "IDX file '" + wi + "': truncated image data (the header declares 201326592 bytes)");

    // No rows at all: refused like an empty CSV or LIBSVM file, not left to fail at the first
    // evaluation or partition.
    const std::string zl = put("zero_lbl", labelFile(0, ""));
    const std::string zi = put("zero_img", imageFile(0, 2, 3, ""));
    CHECK(runtimeErrorOf([&] { readIdx(zi, zl); }) ==
          "IDX files '" + zi + "' and '" + zl + "': no rows (both headers declare 0)");
  }
}

TEST_CASE("the real Fashion-MNIST loads with 60000/10000 rows, 784 features, balanced classes") {
  const std::string base = kFashion;
  const std::array<std::string, 4> files{
      base + "train-images-idx3-ubyte.gz", base + "train-labels-idx1-ubyte.gz",
      base + "t10k-images-idx3-ubyte.gz", base + "t10k-labels-idx1-ubyte.gz"};
  for (const auto& f : files) {
    // deploy/install-deps.sh installs it; without it this test would check nothing.
    REQUIRE_MESSAGE(std::filesystem::exists(f),
                    f << " not installed (deploy/install-deps.sh installs Fashion-MNIST)");
  }
  const Dataset train = readIdx(files[0], files[1]);
  const Dataset test = readIdx(files[2], files[3]);
  CHECK(train.rows() == 60000);
  CHECK(test.rows() == 10000);
  CHECK(train.features() == 784);
  CHECK(test.features() == 784);
  CHECK(train.num_classes == 10);
  // Fashion-MNIST has exactly 6000 training and 1000 test images per class.
  std::vector<int> train_counts(10), test_counts(10);
  for (int32_t y : train.labels) ++train_counts[size_t(y)];
  for (int32_t y : test.labels) ++test_counts[size_t(y)];
  CHECK(train_counts == std::vector<int>(10, 6000));
  CHECK(test_counts == std::vector<int>(10, 1000));
  CHECK(train.dense.minCoeff() == 0.0f);
  CHECK(train.dense.maxCoeff() == 1.0f);
}

TEST_CASE("LIBSVM reader maps -1/+1 labels, skips comments, sorts indices and infers features") {
  ScratchDir dir("libsvm_ok");
  const std::string path = dir.write("a.svm",
                                     "+1 1:0.5 3:2\n"
                                     "-1 2:1.5e0\n"
                                     "\n"
                                     "# a comment line\n"
                                     "1 3:-1 1:1   # trailing comment, indices out of order\r\n");
  const Dataset d = readLibsvm(path);
  REQUIRE(d.is_sparse);
  CHECK(d.rows() == 3);
  CHECK(d.features() == 3);
  CHECK(d.num_classes == 2);
  CHECK(d.labels == std::vector<int32_t>{1, 0, 1});
  const DenseMatrix x(d.sparse);
  DenseMatrix expected(3, 3);
  expected << 0.5f, 0, 2, 0, 1.5f, 0, 1, 0, -1;
  CHECK(x == expected);
  CHECK(d.sparse.nonZeros() == 5);

  const Dataset wide = readLibsvm(path, 10);
  CHECK(wide.features() == 10);

  // The widest index a model takes (2^26) is read; only a labels-only file has no width.
  const Dataset widest = readLibsvm(dir.write("widest.svm", "1 67108864:0.5\n0 1:1\n"));
  CHECK(widest.features() == 67108864);
  CHECK(readLibsvm(dir.write("some_empty.svm", "1\n0 2:1\n")).features() == 2);

  const Dataset multi = readLibsvm(dir.write("m.svm", "3 1:1\n0 2:1\n1 1:2\n"));
  CHECK(multi.labels == std::vector<int32_t>{3, 0, 1});
  CHECK(multi.num_classes == 4);
}

TEST_CASE("LIBSVM reader reports file, line and column of malformed input") {
  ScratchDir dir("libsvm_bad");
  const auto errorFor = [&](const std::string& name, const std::string& text, size_t features = 0) {
    const std::string path = dir.write(name, text);
    return std::make_pair(path, runtimeErrorOf([&] { readLibsvm(path, features); }));
  };
  // Each file with the message it must give after "path:line:column: ".
  struct Case {
    const char* name;
    const char* text;
    size_t features;
    const char* where_and_what;
  };
  const Case cases[] = {
      {"value.svm", "1 1:0.5\n0 2:abc\n", 0, "2:5: value 'abc' is not a number a float can hold"},
      // Finite as a double, infinite as the float a feature is stored in.
      {"huge.svm", "1 1:0.5\n0 2:1e39\n", 0, "2:5: value '1e39' is not a number a float can hold"},
      // Spellings from_chars reads as non-finite numbers, each refused as a feature.
      {"nan.svm", "1 1:nan\n", 0, "1:5: value 'nan' is not a number a float can hold"},
      {"nan_mixed_case.svm", "1 1:NaN\n", 0, "1:5: value 'NaN' is not a number a float can hold"},
      {"minus_nan.svm", "0 1:1 2:-nan\n", 0, "1:9: value '-nan' is not a number a float can hold"},
      {"inf.svm", "1 1:inf\n", 0, "1:5: value 'inf' is not a number a float can hold"},
      {"minus_inf.svm", "1 1:-inf\n", 0, "1:5: value '-inf' is not a number a float can hold"},
      {"infinity.svm", "1 1:Infinity\n", 0,
       "1:5: value 'Infinity' is not a number a float can hold"},
      {"plus_inf.svm", "1 1:+inf\n", 0, "1:5: value '+inf' is not a number a float can hold"},
      {"nan_label.svm", "nan 1:1\n", 0, "1:1: label 'nan' is not a number"},
      {"index0.svm", "1 1:1\n\n1 0:1\n", 0, "3:3: feature index 0 out of range"},
      {"negative_index.svm", "1 1:1\n0 -3:1\n", 0, "2:3: feature index -3 out of range"},
      {"index_text.svm", "1 x:1\n", 0, "1:3: bad feature index 'x'"},
      {"too_big.svm", "1 1:1 9:1\n", 5, "1:7: feature index 9 out of range [1, 5]"},
      {"negative_given_width.svm", "1 -1:1\n", 5, "1:3: feature index -1 out of range [1, 5]"},
      {"label.svm", "1 1:1\ncat 1:1\n", 0, "2:1: label 'cat' is not a number"},
      {"fraction.svm", "0.5 1:1\n", 0, "1:1: label '0.5' is not an integer class"},
      // A class index no model has room for (and whose tables would take gigabytes).
      {"huge_label.svm", "1 1:1\n1000000000 1:1\n", 0,
       "2:1: label 1000000000 is beyond the largest class index 65535"},
      {"no_colon.svm", "1 1:1 7\n", 0, "1:7: expected index:value, got '7'"},
      {"repeat.svm", "1 2:1 2:3\n", 0, "1:7: feature index 2 repeated"},
      {"mixed.svm", "-1 1:1\n2 1:1\n", 0, "1:1: label -1 mixed with label 2 at line 2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const auto [path, msg] = errorFor(c.name, c.text, c.features);
    CHECK(msg == path + ":" + c.where_and_what);
  }
  {
    const auto [path, msg] = errorFor("empty.svm", "# nothing\n");
    CHECK(msg == "'" + path + "': no data rows");
  }
  {
    // An index no model is that wide: said at its line, not when the model is built.
    const auto [path, msg] = errorFor("max_int.svm", "1 1:1\n0 2147483647:1\n");
    CHECK(msg == path + ":2:3: feature index 2147483647 is beyond the widest model (67108864 " +
                     "features)");
    const auto [over, over_msg] = errorFor("over.svm", "1 67108865:1\n");
    CHECK(over_msg == over + ":1:3: feature index 67108865 is beyond the widest model (67108864 " +
                          "features)");
  }
  {
    // Rows with labels only leave a data set of width 0, which no model takes.
    const auto [path, msg] = errorFor("labels_only.svm", "1\n0 # no features\n1 qid:3\n");
    CHECK(msg == "'" + path + "': no features (every row holds only a label)");
  }
  const std::string missing = dir.file("missing.svm");
  CHECK(runtimeErrorOf([&] { readLibsvm(missing); }) == "'" + missing + "': not found");
}

TEST_CASE("CSV reader takes the label column by name or the last column by default") {
  ScratchDir dir("csv_ok");
  const std::string path = dir.write("a.csv",
                                     "\"x1\", x2 ,label\r\n"
                                     "1.5,2,0\r\n"
                                     "\n"
                                     "-3,4e-1,2\r\n");
  const Dataset d = readCsv(path);
  CHECK_FALSE(d.is_sparse);
  REQUIRE(d.rows() == 2);
  CHECK(d.features() == 2);
  CHECK(d.labels == std::vector<int32_t>{0, 2});
  CHECK(d.num_classes == 3);
  CHECK(d.dense(0, 0) == 1.5f);
  CHECK(d.dense(1, 1) == 0.4f);

  const Dataset by_name = readCsv(dir.write("b.csv", "f1,y,f2\n0.5,1,0.25\n2,0,-1\n"), "y");
  CHECK(by_name.labels == std::vector<int32_t>{1, 0});
  CHECK(by_name.num_classes == 2);
  DenseMatrix expected(2, 2);
  expected << 0.5f, 0.25f, 2, -1;
  CHECK(by_name.dense == expected);
}

TEST_CASE("CSV reader reports file, line and column of malformed input") {
  ScratchDir dir("csv_bad");
  // Each file with the message it must give after "path:line:column: ".
  struct Case {
    const char* name;
    const char* text;
    const char* where_and_what;
  };
  const Case cases[] = {
      {"word.csv", "a,b,y\n1,2,0\n1,oops,1\n",
       "3:3: value 'oops' is not a number a float can hold"},
      // Spellings from_chars reads as non-finite numbers, each refused as a feature.
      {"nan.csv", "a,b,y\n1,2,0\n1,nan,1\n", "3:3: value 'nan' is not a number a float can hold"},
      {"nan_upper.csv", "a,b,y\nNAN,2,0\n", "2:1: value 'NAN' is not a number a float can hold"},
      {"minus_nan.csv", "a,b,y\n1,-nan,0\n", "2:3: value '-nan' is not a number a float can hold"},
      {"inf.csv", "a,b,y\n1,inf,0\n", "2:3: value 'inf' is not a number a float can hold"},
      {"minus_inf.csv", "a,b,y\n-Inf,2,0\n", "2:1: value '-Inf' is not a number a float can hold"},
      {"infinity.csv", "a,b,y\n1,\"infinity\",0\n",
       "2:3: value 'infinity' is not a number a float can hold"},
      {"nan_label.csv", "a,y\n1,NaN\n", "2:3: label 'NaN' is not a number"},
      // Finite as a double, infinite as the float a feature is stored in.
      {"huge.csv", "a,b,y\n1,2,0\n1,-1e39,1\n",
       "3:3: value '-1e39' is not a number a float can hold"},
      {"short.csv", "a,b,y\n1,2,0\n1,2\n", "3:4: expected 3 fields, found 2"},
      {"long.csv", "a,b,y\n1,2,0,9\n", "2:7: expected 3 fields, found 4"},
      {"label.csv", "a,y\n1,0\n\n2,one\n", "4:3: label 'one' is not a number"},
      {"header.csv", "y\n1\n", "1:1: header needs a label and a feature column"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string path = dir.write(c.name, c.text);
    CHECK(runtimeErrorOf([&] { readCsv(path); }) == path + ":" + c.where_and_what);
  }
  {
    // The largest int32 and the first index past the largest class both get a clear error.
    for (const std::string label : {"2147483647", "65536"}) {
      const std::string path = dir.write("huge_label.csv", "x,y\n1.0,0\n2.0," + label + "\n");
      CHECK(runtimeErrorOf([&] { readCsv(path); }) ==
            path + ":3:5: label " + label + " is beyond the largest class index 65535");
    }
    const std::string path = dir.write("top_label.csv", "x,y\n1.0,0\n2.0,65535\n");
    CHECK(readCsv(path).num_classes == 65536);
  }
  {
    const std::string path = dir.write("column.csv", "a,y\n1,0\n");
    CHECK(runtimeErrorOf([&] { readCsv(path, "target"); }) ==
          path + ":1:1: no column named 'target' in the header");
  }
  {
    const std::string path = dir.write("empty.csv", "");
    CHECK(runtimeErrorOf([&] { readCsv(path); }) ==
          "'" + path + "': empty file, expected a header line");
    const std::string header_only = dir.write("header_only.csv", "a,y\n\n");
    CHECK(runtimeErrorOf([&] { readCsv(header_only); }) ==
          "'" + header_only + "': no data rows after the header");
  }
  const std::string missing = dir.file("missing.csv");
  CHECK(runtimeErrorOf([&] { readCsv(missing); }) == "'" + missing + "': not found");
}

TEST_CASE("a UTF-8 byte order mark before the first line is not part of the first field") {
  // Spreadsheet exports start CSV files with EF BB BF; the header's first name and a LIBSVM
  // file's first label must read as if it were not there.
  ScratchDir dir("bom");
  const std::string bom = "\xEF\xBB\xBF";
  const std::string csv = "y,a,b\n1,0.5,2\n0,-1,3\n";
  const Dataset csv_plain = readCsv(dir.write("plain.csv", csv), "y");
  const Dataset csv_bom = readCsv(dir.write("bom.csv", bom + csv), "y");
  CHECK(csv_bom.labels == std::vector<int32_t>{1, 0});
  CHECK(csv_bom.labels == csv_plain.labels);
  CHECK(csv_bom.dense == csv_plain.dense);

  const std::string svm = "1 1:0.5 2:2\n0 2:3\n";
  const Dataset svm_plain = readLibsvm(dir.write("plain.svm", svm));
  const Dataset svm_bom = readLibsvm(dir.write("bom.svm", bom + svm));
  CHECK(svm_bom.labels == std::vector<int32_t>{1, 0});
  CHECK(DenseMatrix(svm_bom.sparse) == DenseMatrix(svm_plain.sparse));
  // Only at the start of the file: elsewhere the bytes are a malformed field as before.
  const std::string late = dir.write("late.svm", svm + bom + "1 1:1\n");
  CHECK(contains(runtimeErrorOf([&] { readLibsvm(late); }), late + ":3:1: label '"));
}

TEST_CASE("every reader refuses a directory and a file that fails mid-read, naming the file") {
  ScratchDir dir("not_a_file");
  const std::string folder = dir.file("folder");
  std::filesystem::create_directories(folder);
  const std::string labels = dir.write("lbl", idxLabels());
  const std::string images = dir.write("img", idxImages());
  // A directory read as a file used to be an empty CSV or LIBSVM file, or a read error.
  CHECK(runtimeErrorOf([&] { readCsv(folder); }) == "'" + folder + "': is a directory");
  CHECK(runtimeErrorOf([&] { readLibsvm(folder); }) == "'" + folder + "': is a directory");
  CHECK(runtimeErrorOf([&] { readIdx(folder, labels); }) ==
        "IDX file '" + folder + "': is a directory");
  CHECK(runtimeErrorOf([&] { readIdx(images, folder); }) ==
        "IDX file '" + folder + "': is a directory");
  // The loader says so at the configuration key that names the file.
  DataSource src;
  src.format = "csv";
  src.path = folder;
  src.path_at = "w.yaml:4:9";
  CHECK(runtimeErrorOf([&] { loadDataset(src); }) ==
        "w.yaml:4:9: csv file is a directory: " + folder);
  src.format = "idx";
  src.images = images;
  src.labels = folder;
  src.labels_at = "w.yaml:5:11";
  CHECK(runtimeErrorOf([&] { loadDataset(src); }) ==
        "w.yaml:5:11: labels file is a directory: " + folder);

  // /proc/self/mem is a regular file whose first page cannot be read (EIO): a read error must
  // not pass for the end of the file.
  const std::string unreadable = "/proc/self/mem";
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(unreadable), "no " << unreadable);
  std::string msg = runtimeErrorOf([&] { readCsv(unreadable); });
  CHECK(contains(msg, "'" + unreadable + "': read error"));
  msg = runtimeErrorOf([&] { readLibsvm(unreadable); });
  CHECK(contains(msg, "'" + unreadable + "': read error"));
  msg = runtimeErrorOf([&] { readIdx(images, unreadable); });
  CHECK(contains(msg, "IDX file '" + unreadable + "': read error"));
}

TEST_CASE(
    "a worker's streamed IDX shard holds exactly the rows loadShard cuts from the whole file") {
  // 300 random 4x5 images with labels 0..6, gzip: every shard of three partitions, read streamed,
  // equals the same shard cut from the fully read file (rows, order, labels, class count).
  ScratchDir dir("idx_shard");
  const uint32_t n = 300;
  std::string images = bigEndian32(0x00000803) + bigEndian32(n) + bigEndian32(4) + bigEndian32(5);
  std::string labels = bigEndian32(0x00000801) + bigEndian32(n);
  tern::Rng rng(21);
  for (uint32_t i = 0; i < n; ++i) {
    for (int j = 0; j < 20; ++j) images.push_back(char(rng() & 0xff));
    labels.push_back(char(rng() % 7));
  }
  DataSource src;
  src.format = "idx";
  src.images = writeGzip(dir.file("img.gz"), images);
  src.labels = writeGzip(dir.file("lbl.gz"), labels);
  const Dataset full = loadDataset(src);
  PartitionSpec iid, skew, volume;
  skew.dirichlet_alpha = 0.3;
  volume.volume_ratio = 8.0;
  for (const auto& spec : {iid, skew, volume}) {
    for (size_t i = 0; i < 4; ++i) {
      CAPTURE(i);
      const Dataset want = loadShard(full, i, 4, spec);
      const Dataset got = loadShardOf(src, i, 4, spec);
      CHECK(got.num_classes == full.num_classes);
      CHECK(got.labels == want.labels);
      CHECK(got.is_bytes);
      CHECK(want.is_bytes);
      REQUIRE(got.bytes.rows() == want.bytes.rows());
      std::vector<uint8_t> a(got.features()), b(want.features());
      for (size_t r = 0; r < got.rows(); ++r) {
        got.bytes.unpack(r, a);
        want.bytes.unpack(r, b);
        CHECK(a == b);
      }
    }
  }
  CHECK(contains(runtimeErrorOf([&] { loadShardOf(src, 4, 4, iid); }), "out of range"));
}

TEST_CASE("every shard of one partition says the same fingerprint, another partition another") {
  // The fingerprint workers compare at the coordinator: the same for every shard index of one
  // data set, shard count and partition spec, read streamed (IDX) or whole (CSV); different when
  // any of them differs.
  ScratchDir dir("fingerprint");
  const uint32_t n = 120;
  std::string images = bigEndian32(0x00000803) + bigEndian32(n) + bigEndian32(2) + bigEndian32(2);
  std::string labels = bigEndian32(0x00000801) + bigEndian32(n);
  std::string csv = "a,b,c,d,y\n";
  tern::Rng rng(5);
  for (uint32_t i = 0; i < n; ++i) {
    std::string row;
    for (int j = 0; j < 4; ++j) {
      const int pixel = int(rng() & 0xff);
      images.push_back(char(pixel));
      row += std::to_string(pixel) + ",";
    }
    const int label = int(rng() % 3);
    labels.push_back(char(label));
    csv += row + std::to_string(label) + "\n";
  }
  DataSource idx;
  idx.format = "idx";
  idx.images = writeGzip(dir.file("img.gz"), images);
  idx.labels = writeGzip(dir.file("lbl.gz"), labels);
  DataSource table;
  table.format = "csv";
  table.path = dir.file("rows.csv");
  std::ofstream(table.path) << csv;
  PartitionSpec skew;
  skew.dirichlet_alpha = 0.5;
  skew.seed = 3;
  const Dataset full = loadDataset(idx);
  const uint64_t want = partitionFingerprint(full.labels, full.num_classes, 4, skew);
  CHECK(want != 0);
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    uint64_t streamed = 0, whole = 0;
    loadShardOf(idx, i, 4, skew, &streamed);
    loadShardOf(table, i, 4, skew, &whole);
    CHECK(streamed == want);
    CHECK(whole == want);
  }
  // Another shard count, partition spec or data set: another fingerprint.
  PartitionSpec other_seed = skew, other_alpha = skew, other_ratio = skew;
  other_seed.seed = 4;
  other_alpha.dirichlet_alpha = 0.6;
  other_ratio.volume_ratio = 2.0;
  CHECK(partitionFingerprint(full.labels, full.num_classes, 3, skew) != want);
  CHECK(partitionFingerprint(full.labels, full.num_classes, 4, other_seed) != want);
  CHECK(partitionFingerprint(full.labels, full.num_classes, 4, other_alpha) != want);
  CHECK(partitionFingerprint(full.labels, full.num_classes, 4, other_ratio) != want);
  std::vector<int32_t> relabelled = full.labels;
  relabelled[17] = (relabelled[17] + 1) % 3;
  CHECK(partitionFingerprint(relabelled, full.num_classes, 4, skew) != want);
  std::vector<int32_t> fewer(full.labels.begin(), full.labels.end() - 1);
  CHECK(partitionFingerprint(fewer, full.num_classes, 4, skew) != want);
}

TEST_CASE("more shards than rows is an error naming the data's file and configuration line") {
  // The partition's own message says what is wrong but not where: the loader names the file.
  ScratchDir dir("few_rows");
  const std::string why = "partition: 3 rows cannot give each of 5 workers a row";
  DataSource csv;
  csv.format = "csv";
  csv.path = dir.write("three.csv", "a,y\n1,0\n2,1\n3,0\n");
  csv.path_at = "w.yaml:4:9";
  CHECK(runtimeErrorOf([&] { loadShardOf(csv, 0, 5, PartitionSpec{}); }) ==
        "w.yaml:4:9: '" + csv.path + "': " + why);
  const Dataset full = loadDataset(csv);
  CHECK(runtimeErrorOf([&] { partitionOf(csv, full, 5, PartitionSpec{}); }) ==
        "w.yaml:4:9: '" + csv.path + "': " + why);

  DataSource svm;
  svm.format = "libsvm";
  svm.path = dir.write("three.svm", "1 1:1\n0 2:1\n1 1:3\n");
  PartitionSpec skewed;
  skewed.dirichlet_alpha = 0.5;
  CHECK(runtimeErrorOf([&] { loadShardOf(svm, 4, 5, skewed); }) == "'" + svm.path + "': " + why);

  DataSource idx;
  idx.format = "idx";
  idx.images = dir.write("img", idxImages());
  idx.labels = dir.write("lbl", idxLabels());
  idx.images_at = "w.yaml:3:11";
  CHECK(runtimeErrorOf([&] { loadShardOf(idx, 0, 5, PartitionSpec{}); }) ==
        "w.yaml:3:11: IDX files '" + idx.images + "' and '" + idx.labels + "': " + why);

  DataSource synthetic;
  synthetic.format = "synthetic";
  synthetic.rows = 3;
  synthetic.features = 2;
  CHECK(runtimeErrorOf([&] { loadShardOf(synthetic, 0, 5, PartitionSpec{}); }) ==
        "synthetic data: " + why);
  // A stray label makes label skew's tables too wide: the file with the label is named.
  std::string stray;
  for (int i = 0; i < 200; ++i) stray += (i == 5 ? "65535" : std::to_string(i % 2)) + " 1:1\n";
  svm.path = dir.write("stray.svm", stray);
  CHECK(contains(runtimeErrorOf([&] { loadShardOf(svm, 0, 200, skewed); }),
                 "'" + svm.path + "': partition: label skew needs tables of 200 workers x 65536 " +
                     "classes (the largest label is 65535)"));
  // As many shards as rows is enough: one row each.
  for (size_t i = 0; i < 3; ++i) CHECK(loadShardOf(csv, i, 3, PartitionSpec{}).rows() == 1);
}

TEST_CASE(
    "data is checked against the model as it loads: rows, width and labels, naming the file") {
  // A test set the model cannot evaluate used to pass the loader and stop the coordinator at its
  // first evaluation, naming neither test_data nor the file.
  ScratchDir dir("fits_model");
  ModelSpec spec;
  spec.kind = "softmax";
  spec.features = 2;
  spec.classes = 2;
  DataSource csv;
  csv.format = "csv";
  csv.path = dir.write("wide.csv", "a,b,c,y\n1,2,3,0\n4,5,6,1\n");
  csv.path_at = "c.yaml:30:11";
  const Dataset wide = loadDataset(csv);
  CHECK(runtimeErrorOf([&] { requireFitsModel("test_data", csv, wide, spec); }) ==
        "c.yaml:30:11: test_data '" + csv.path + "': 3 features, model has 2");
  spec.features = 3;
  CHECK_NOTHROW(requireFitsModel("test_data", csv, wide, spec));
  DataSource narrow = csv;
  narrow.path = dir.write("narrow.csv", "a,y\n1,0\n");
  CHECK(runtimeErrorOf([&] { requireFitsModel("test_data", narrow, loadDataset(narrow), spec); }) ==
        "c.yaml:30:11: test_data '" + narrow.path + "': 1 feature, model has 3");

  // IDX: the width is the images file's, the labels the labels file's.
  DataSource idx;
  idx.format = "idx";
  idx.images = dir.write("img", idxImages());  // 2x3 images, labels 2, 0, 1
  idx.labels = dir.write("lbl", idxLabels());
  idx.images_at = "c.yaml:31:13";
  idx.labels_at = "c.yaml:32:13";
  const Dataset images = loadDataset(idx);
  CHECK(runtimeErrorOf([&] { requireFitsModel("train_data", idx, images, spec); }) ==
        "c.yaml:31:13: train_data '" + idx.images + "': 6 features, model has 3");
  spec.features = 6;
  CHECK(runtimeErrorOf([&] { requireFitsModel("test_data", idx, images, spec); }) ==
        "c.yaml:32:13: test_data '" + idx.labels +
            "': label 2 has no output in a softmax model of 2 classes");
  spec.classes = 3;
  CHECK_NOTHROW(requireFitsModel("test_data", idx, images, spec));

  // No rows (no reader returns that, but a test set without rows can never be evaluated).
  DataSource synthetic;
  synthetic.format = "synthetic";
  Dataset empty;
  empty.dense.resize(0, 6);
  empty.num_classes = 2;
  CHECK(runtimeErrorOf([&] { requireFitsModel("test_data", synthetic, empty, spec); }) ==
        "test_data (synthetic data): no rows");
}
