#include "common/ml/detail/text_input.hpp"

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "common/ml/detail/input_file.hpp"
#include "common/ml/model.hpp"

namespace tern::ml::detail {
namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

}  // namespace

std::string readTextFile(const std::string& path) {
  if (const std::string why = whyNotAFile(path); !why.empty()) {
    throw std::runtime_error("'" + path + "': " + why);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("'" + path + "': cannot open");
  // Read through the ifstream itself: `buf << in.rdbuf()` records a failed read on buf, not on
  // in, and a read error then looks like the end of the file.
  std::string text;
  std::array<char, 1 << 16> chunk{};
  errno = 0;
  while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0) {
    text.append(chunk.data(), size_t(in.gcount()));
  }
  if (in.bad()) {
    const int error = errno;
    throw std::runtime_error("'" + path + "': read error" +
                             (error != 0 ? std::string(" (") + std::strerror(error) + ")" : ""));
  }
  // A UTF-8 byte order mark (spreadsheet exports write one) is not part of the first field.
  if (text.starts_with(kUtf8Bom)) text.erase(0, kUtf8Bom.size());
  return text;
}

void textError(const std::string& path, size_t line, size_t column, const std::string& what) {
  throw std::runtime_error(path + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                           what);
}

std::optional<double> parseNumber(std::string_view token) {
  if (!token.empty() && token.front() == '+') token.remove_prefix(1);
  if (token.empty()) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::optional<float> parseFeature(std::string_view token) {
  const auto value = parseNumber(token);
  if (!value || !std::isfinite(static_cast<float>(*value))) return std::nullopt;
  return static_cast<float>(*value);
}

void LabelCollector::add(std::string_view token, size_t line, size_t column) {
  const auto value = parseNumber(token);
  if (!value) textError(path_, line, column, "label '" + std::string(token) + "' is not a number");
  if (*value != std::floor(*value) || std::abs(*value) > std::numeric_limits<int32_t>::max()) {
    textError(path_, line, column, "label '" + std::string(token) + "' is not an integer class");
  }
  const auto label = static_cast<int64_t>(*value);
  if (label < -1) textError(path_, line, column, "negative label " + std::to_string(label));
  // Class indices index per-class tables (histograms, partition pools, the model's outputs).
  if (label >= int64_t{kMaxClasses}) {
    textError(path_, line, column,
              "label " + std::to_string(label) + " is beyond the largest class index " +
                  std::to_string(kMaxClasses - 1));
  }
  const Position here{line, column};
  if (label == -1 && !first_minus_one_) first_minus_one_ = here;
  if (label == 0 && !first_zero_) first_zero_ = here;
  if (label > 1 && !first_other_) {
    first_other_ = here;
    first_other_value_ = label;
  }
  raw_.push_back(label);
}

int32_t LabelCollector::finish(std::vector<int32_t>& labels) {
  if (first_minus_one_ && (first_other_ || first_zero_)) {
    // -1 only makes sense as the negative class of a {-1,+1} task.
    const Position& p = *first_minus_one_;
    const Position& q = first_other_ ? *first_other_ : *first_zero_;
    textError(path_, p.line, p.column,
              "label -1 mixed with label " + std::to_string(first_other_ ? first_other_value_ : 0) +
                  " at line " + std::to_string(q.line));
  }
  labels.clear();
  labels.reserve(raw_.size());
  int64_t max_label = 1;  // binary tasks always have two classes, even if one is absent
  for (int64_t y : raw_) {
    const int64_t mapped = y == -1 ? 0 : y;
    max_label = std::max(max_label, mapped);
    labels.push_back(static_cast<int32_t>(mapped));
  }
  raw_.clear();
  return static_cast<int32_t>(max_label + 1);
}

}  // namespace tern::ml::detail
