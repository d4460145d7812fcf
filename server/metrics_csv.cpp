#include "server/metrics_csv.hpp"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace tern::server {
namespace {

template <typename F>
std::string joinWorkers(const RoundRecord& r, F f) {
  std::string s;
  for (size_t i = 0; i < r.workers.size(); ++i) {
    if (i) s += ';';
    s += f(r.workers[i]);
  }
  return s;
}

}  // namespace

MetricsCsv::MetricsCsv(const std::string& path) : out_(path) {
  if (!out_) throw std::runtime_error(path + ": cannot open metrics CSV for writing");
  out_ << header() << '\n';
}

MetricsCsv::MetricsCsv(const std::string& path, uint64_t resume_round) {
  std::vector<std::string> kept;
  bool continues = false;
  if (std::ifstream in(path); in) {
    std::string line;
    continues = std::getline(in, line) && line == header();
    while (continues && std::getline(in, line)) {
      // A row's round is its first field; a torn last line (a crash mid-write) has none.
      uint64_t round = 0;
      const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), round);
      if (ec == std::errc() && end != line.data() + line.size() && *end == ',' &&
          round < resume_round)
        kept.push_back(line);
    }
    if (!continues) {
      std::error_code ec;
      std::filesystem::rename(path, path + ".old", ec);
      if (ec) throw std::runtime_error(path + ": cannot keep the old metrics CSV: " + ec.message());
    }
  }
  out_.open(path, std::ios::trunc);
  if (!out_) throw std::runtime_error(path + ": cannot open metrics CSV for writing");
  out_ << header() << '\n';
  for (const auto& line : kept) out_ << line << '\n';
  out_.flush();
}

std::string MetricsCsv::header() {
  return "round,time_s,train_loss,test_accuracy,upload_bytes,download_bytes,full_bytes,"
         "participants,evaluated,late_pushes,rejected,caps,shares,link_a,link_b,link_samples,"
         "levels,predicted_costs,predicted_improvements,predicted_steps,worker_ids";
}

std::string MetricsCsv::row(const RoundRecord& r) {
  return fmt::format(
      "{},{:.6f},{:.6f},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", r.round,
      r.time_s, r.train_loss, r.test_accuracy, r.upload_bytes, r.download_bytes, r.full_bytes,
      r.participants, r.evaluated ? 1 : 0, r.late_pushes, r.rejected,
      joinWorkers(r, [](const WorkerRecord& w) { return std::to_string(w.alive ? w.cap : 0); }),
      joinWorkers(r, [](const WorkerRecord& w) { return fmt::format("{:.6f}", w.share); }),
      joinWorkers(r,
                  [](const WorkerRecord& w) { return fmt::format("{:.6g}", w.link.a_seconds()); }),
      joinWorkers(r,
                  [](const WorkerRecord& w) {
                    return fmt::format("{:.6g}", w.link.b_seconds_per_packet());
                  }),
      joinWorkers(r, [](const WorkerRecord& w) { return std::to_string(w.link.samples()); }),
      joinWorkers(r, [](const WorkerRecord& w) { return std::to_string(w.level); }),
      joinWorkers(r, [](const WorkerRecord& w) { return fmt::format("{:.6g}", w.predicted_cost); }),
      joinWorkers(
          r, [](const WorkerRecord& w) { return fmt::format("{:.6g}", w.predicted_improvement); }),
      joinWorkers(r, [](const WorkerRecord& w) { return fmt::format("{:.6g}", w.predicted_step); }),
      joinWorkers(r, [](const WorkerRecord& w) { return std::to_string(w.id); }));
}

bool MetricsCsv::write(const RoundRecord& r) {
  out_.clear();
  out_ << row(r) << '\n';
  out_.flush();
  return bool(out_);
}

bool MetricsCsv::keepPrevious(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0 ||
      ec)
    return false;
  std::filesystem::rename(path, path + ".old", ec);
  if (ec) throw std::runtime_error(path + ": cannot keep the old metrics CSV: " + ec.message());
  return true;
}

std::string progressLine(const RoundRecord& r) {
  double pct = r.full_bytes ? 100.0 * double(r.upload_bytes) / double(r.full_bytes) : 0.0;
  std::string caps = joinWorkers(
      r, [](const WorkerRecord& w) { return w.alive ? std::to_string(w.cap) : std::string("-"); });
  std::string links = joinWorkers(r, [](const WorkerRecord& w) {
    if (w.link.samples() == 0) return std::string("?");
    return fmt::format("{:.2g}s+{:.2g}s/pkt(n={})", w.link.a_seconds(),
                       w.link.b_seconds_per_packet(), w.link.samples());
  });
  return fmt::format(
      "round {:>5} t={:7.2f}s loss={:.4f} acc={} up={} ({:.2f}% of full) "
      "workers={} caps=[{}] links=[{}]",
      r.round, r.time_s, r.train_loss,
      r.accuracy_measured ? fmt::format("{:.4f}", r.test_accuracy) : std::string("-"),
      r.upload_bytes, pct, r.participants, caps, links);
}

std::string finalLine(uint64_t rounds, std::optional<double> test_accuracy, uint64_t upload_bytes,
                      uint64_t full_bytes) {
  return fmt::format("final: rounds={} test_accuracy={} upload_bytes={} full_bytes={}", rounds,
                     test_accuracy ? fmt::format("{:.4f}", *test_accuracy) : std::string("none"),
                     upload_bytes, full_bytes);
}

}  // namespace tern::server
