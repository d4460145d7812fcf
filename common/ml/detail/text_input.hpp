#pragma once
// Shared pieces of the text readers (LIBSVM, CSV): whole-file reading, numeric tokens, errors
// that point at file:line:column, and the label convention of dataset.hpp.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern::ml::detail {

// The whole file, without a leading UTF-8 byte order mark. Throws std::runtime_error naming the
// file when it is not a regular file or cannot be read to its end.
std::string readTextFile(const std::string& path);

[[noreturn]] void textError(const std::string& path, size_t line, size_t column,
                            const std::string& what);

// A finite number filling the whole token (a leading '+' is allowed), or nullopt.
std::optional<double> parseNumber(std::string_view token);
// A feature value: a number as above that stays finite as a float (features are stored as
// floats; 1e39 would become infinity and poison the model's smoothness and gradients).
std::optional<float> parseFeature(std::string_view token);

// Collects integer labels with their positions, then maps them to class indices:
// {-1,+1} or {0,1} become {0,1}; any other set of non-negative integers is kept as is.
class LabelCollector {
 public:
  explicit LabelCollector(std::string path) : path_(std::move(path)) {}
  void add(std::string_view token, size_t line, size_t column);
  // Returns num_classes and moves the mapped labels out.
  int32_t finish(std::vector<int32_t>& labels);

 private:
  struct Position {
    size_t line = 0;
    size_t column = 0;
  };
  std::string path_;
  std::vector<int64_t> raw_;
  std::optional<Position> first_minus_one_;
  std::optional<Position> first_other_;  // first label outside {-1, 0, +1}
  std::optional<Position> first_zero_;
  int64_t first_other_value_ = 0;
};

}  // namespace tern::ml::detail
