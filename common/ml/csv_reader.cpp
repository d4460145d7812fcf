// CSV with a header line naming the columns; one column is the label, all others are numeric
// features. Fields are separated by commas and may be wrapped in double quotes (quoted fields
// cannot contain commas: the datasets we read never need that).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/ml/detail/text_input.hpp"

namespace tern::ml {
namespace {

struct Field {
  std::string_view text;
  size_t column = 0;  // 1-based position of the field's first character
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

void splitFields(std::string_view line, std::vector<Field>& out) {
  out.clear();
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    const size_t end = comma == std::string_view::npos ? line.size() : comma;
    out.push_back({trim(line.substr(start, end - start)), start + 1});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

bool isBlankLine(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// The label column's index among the header's fields (the last one when no name is given).
size_t labelIndex(const std::vector<Field>& header, const std::string& label_column,
                  const std::string& path, size_t line_no) {
  if (header.size() < 2) {
    detail::textError(path, line_no, 1, "header needs a label and a feature column");
  }
  if (label_column.empty()) return header.size() - 1;
  const auto it = std::find_if(header.begin(), header.end(),
                               [&](const Field& f) { return f.text == label_column; });
  if (it == header.end()) {
    detail::textError(path, line_no, 1, "no column named '" + label_column + "' in the header");
  }
  return size_t(it - header.begin());
}

// Reads one data row's fields: the label goes to `labels`, the features to `values`.
void readRow(std::string_view line, const std::vector<Field>& fields, size_t num_columns,
             size_t label_index, const std::string& path, size_t line_no,
             detail::LabelCollector& labels, std::vector<float>& values) {
  if (fields.size() != num_columns) {
    const size_t column =
        fields.size() > num_columns ? fields[num_columns].column : line.size() + 1;
    detail::textError(path, line_no, column,
                      "expected " + std::to_string(num_columns) + " fields, found " +
                          std::to_string(fields.size()));
  }
  for (size_t k = 0; k < fields.size(); ++k) {
    if (k == label_index) {
      labels.add(fields[k].text, line_no, fields[k].column);
      continue;
    }
    const auto value = detail::parseFeature(fields[k].text);
    if (!value) {
      detail::textError(
          path, line_no, fields[k].column,
          "value '" + std::string(fields[k].text) + "' is not a number a float can hold");
    }
    values.push_back(*value);
  }
}

}  // namespace

Dataset readCsv(const std::string& path, const std::string& label_column) {
  const std::string text = detail::readTextFile(path);
  detail::LabelCollector labels(path);
  std::vector<Field> fields;
  std::vector<float> values;
  size_t num_columns = 0;
  size_t label_index = 0;
  size_t rows = 0;

  size_t line_no = 0;
  size_t pos = 0;
  bool have_header = false;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (isBlankLine(line)) continue;
    splitFields(line, fields);
    if (!have_header) {
      have_header = true;
      num_columns = fields.size();
      label_index = labelIndex(fields, label_column, path, line_no);
      continue;
    }
    readRow(line, fields, num_columns, label_index, path, line_no, labels, values);
    ++rows;
  }
  if (!have_header) throw std::runtime_error("'" + path + "': empty file, expected a header line");
  if (rows == 0) throw std::runtime_error("'" + path + "': no data rows after the header");

  Dataset out;
  out.is_sparse = false;
  out.num_classes = labels.finish(out.labels);
  const auto features = static_cast<Eigen::Index>(num_columns - 1);
  out.dense =
      Eigen::Map<const DenseMatrix>(values.data(), static_cast<Eigen::Index>(rows), features);
  return out;
}

}  // namespace tern::ml
