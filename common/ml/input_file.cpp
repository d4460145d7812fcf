#include "common/ml/detail/input_file.hpp"

#include <filesystem>
#include <system_error>

namespace tern::ml::detail {

std::string whyNotAFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) return "not found";
  if (ec) return "cannot be examined (" + ec.message() + ")";
  if (status.type() == fs::file_type::directory) return "is a directory";
  if (status.type() != fs::file_type::regular) return "is not a regular file";
  return "";
}

}  // namespace tern::ml::detail
