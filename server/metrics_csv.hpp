#pragma once
// The per-round metrics CSV written by the coordinator and the simulator, and the one-line
// progress summary. Per-worker values are ';'-joined in worker-id order inside one column.
#include <fstream>
#include <string>

#include "server/coordinator_core.hpp"

namespace tern::server {

class MetricsCsv {
 public:
  // Throws std::runtime_error when the file cannot be opened.
  explicit MetricsCsv(const std::string& path);
  void write(const RoundRecord& r);
  static std::string header();
  static std::string row(const RoundRecord& r);

 private:
  std::ofstream out_;
};

std::string progressLine(const RoundRecord& r);
std::string finalLine(uint64_t rounds, double test_accuracy, uint64_t upload_bytes,
                      uint64_t full_bytes);

}  // namespace tern::server
