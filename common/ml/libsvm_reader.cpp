// LIBSVM / SVMlight text: one row per line, "label idx:val idx:val ... [# comment]", 1-based
// feature indices. The CSR arrays are built directly so large files (RCV1) never go through a
// triplet list or a dense intermediate.
#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/detail/text_input.hpp"
#include "common/ml/model.hpp"

namespace tern::ml {
namespace {

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

struct Entry {
  int64_t index = 0;
  float value = 0;
  size_t column = 0;  // where the token starts, for error messages after sorting
};

// Where a line sits, for its error messages, and the width the caller asked for (0 = inferred).
struct LineAt {
  const std::string& path;
  size_t line_no;
  size_t features;
};

// The entry of one index:value token starting at `column`; nullopt for a ranking group id
// (qid), which carries no feature.
std::optional<Entry> parseEntry(std::string_view token, size_t column, const LineAt& at) {
  using detail::textError;
  const size_t colon = token.find(':');
  if (colon == std::string_view::npos) {
    textError(at.path, at.line_no, column,
              "expected index:value, got '" + std::string(token) + "'");
  }
  const std::string_view index_text = token.substr(0, colon);
  if (index_text == "qid") return std::nullopt;
  int64_t index = 0;
  const auto [iend, iec] =
      std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  if (iec != std::errc() || iend != index_text.data() + index_text.size()) {
    textError(at.path, at.line_no, column, "bad feature index '" + std::string(index_text) + "'");
  }
  if (index < 1 || (at.features != 0 && static_cast<uint64_t>(index) > at.features)) {
    textError(at.path, at.line_no, column,
              "feature index " + std::to_string(index) + " out of range" +
                  (at.features != 0 ? " [1, " + std::to_string(at.features) + "]" : ""));
  }
  // Said here, at its line, rather than by makeModel when the inferred width is used.
  if (index > int64_t{kMaxFeatures}) {
    textError(at.path, at.line_no, column,
              "feature index " + std::to_string(index) + " is beyond the widest model (" +
                  std::to_string(kMaxFeatures) + " features)");
  }
  const auto value = detail::parseFeature(token.substr(colon + 1));
  if (!value) {
    textError(
        at.path, at.line_no, column + colon + 1,
        "value '" + std::string(token.substr(colon + 1)) + "' is not a number a float can hold");
  }
  return Entry{index, *value, column};
}

// Reads one line (its comment cut off): the label goes to `labels`, the entries to `row`. False
// for a blank line.
bool parseLine(std::string_view line, const LineAt& at, detail::LabelCollector& labels,
               std::vector<Entry>& row) {
  row.clear();
  bool have_label = false;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && isBlank(line[i])) ++i;
    if (i >= line.size()) break;
    size_t j = i;
    while (j < line.size() && !isBlank(line[j])) ++j;
    const std::string_view token = line.substr(i, j - i);
    const size_t column = i + 1;
    i = j;
    if (!have_label) {
      labels.add(token, at.line_no, column);
      have_label = true;
    } else if (auto entry = parseEntry(token, column, at)) {
      row.push_back(*entry);
    }
  }
  return have_label;
}

// The matrix in compressed sparse row form, built row by row.
struct CsrRows {
  std::vector<int32_t> outer{0};
  std::vector<int32_t> inner;
  std::vector<float> values;
  int64_t max_index = 0;

  // Appends a row. The format asks for ascending indices; any order is tolerated but not a
  // repeated index.
  void add(std::vector<Entry>& row, const LineAt& at) {
    const auto by_index = [](const Entry& a, const Entry& b) { return a.index < b.index; };
    if (!std::is_sorted(row.begin(), row.end(), by_index)) {
      std::stable_sort(row.begin(), row.end(), by_index);
    }
    for (size_t k = 1; k < row.size(); ++k) {
      if (row[k].index == row[k - 1].index) {
        detail::textError(at.path, at.line_no, std::max(row[k].column, row[k - 1].column),
                          "feature index " + std::to_string(row[k].index) + " repeated");
      }
    }
    for (const Entry& e : row) {
      inner.push_back(static_cast<int32_t>(e.index - 1));
      values.push_back(e.value);
      max_index = std::max(max_index, e.index);
    }
    if (inner.size() > size_t(std::numeric_limits<int32_t>::max())) {
      detail::textError(at.path, at.line_no, 1, "too many non-zeros for 32-bit indices");
    }
    outer.push_back(static_cast<int32_t>(inner.size()));
  }
};

}  // namespace

Dataset readLibsvm(const std::string& path, size_t features) {
  if (features > kMaxFeatures) {
    throw std::invalid_argument("readLibsvm: features " + std::to_string(features) +
                                " beyond the widest model (" + std::to_string(kMaxFeatures) + ")");
  }
  const std::string text = detail::readTextFile(path);
  detail::LabelCollector labels(path);
  CsrRows csr;
  std::vector<Entry> row;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    const LineAt at{path, line_no, features};
    if (parseLine(line, at, labels, row)) csr.add(row, at);  // else blank or comment-only
  }

  Dataset out;
  out.is_sparse = true;
  out.num_classes = labels.finish(out.labels);
  if (out.labels.empty()) throw std::runtime_error("'" + path + "': no data rows");
  const auto cols = static_cast<Eigen::Index>(features != 0 ? features : size_t(csr.max_index));
  if (cols == 0) {
    throw std::runtime_error("'" + path + "': no features (every row holds only a label)");
  }
  const auto nrows = static_cast<Eigen::Index>(out.labels.size());
  out.sparse =
      Eigen::Map<const SparseMatrix>(nrows, cols, static_cast<Eigen::Index>(csr.inner.size()),
                                     csr.outer.data(), csr.inner.data(), csr.values.data());
  return out;
}

}  // namespace tern::ml
