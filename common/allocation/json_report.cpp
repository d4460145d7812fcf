#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "common/allocation/allocator.hpp"
#include "common/allocation/budget.hpp"
#include "common/allocation/link_costs.hpp"

namespace tern::allocation {

namespace {

class JsonWriter {
 public:
  std::string take() { return std::move(out_); }

  void raw(const char* text) { out_ += text; }

  void key(const char* name) {
    separate();
    string(name);
    out_ += ':';
    fresh_ = true;
  }

  void number(double v) {
    separate();
    if (!std::isfinite(v)) {
      out_ += "null";  // JSON has no infinity or NaN
      return;
    }
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
    out_.append(buf, res.ptr);
  }

  void boolean(bool v) {
    separate();
    out_ += v ? "true" : "false";
  }

  void integer(uint64_t v) {
    separate();
    out_ += std::to_string(v);
  }

  void text(const std::string& s) {
    separate();
    string(s);
  }

  void open(char bracket) {
    separate();
    out_ += bracket;
    fresh_ = true;
  }

  void close(char bracket) {
    out_ += bracket;
    fresh_ = false;
  }

  template <typename T>
  void array(const char* name, const std::vector<T>& values) {
    key(name);
    open('[');
    for (const T& v : values) {
      if constexpr (std::is_integral_v<T>) {
        integer(v);
      } else {
        number(v);
      }
    }
    close(']');
  }

 private:
  void separate() {
    if (!fresh_) out_ += ',';
    fresh_ = false;
  }

  void string(const std::string& s) {
    out_ += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ += buf;
          } else {
            out_ += ch;  // UTF-8 bytes pass through unchanged
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  bool fresh_ = true;
};

}  // namespace

std::string allocationToJson(const std::vector<WorkerLoad>& workers, uint32_t dim,
                             const Budget& budget, const Allocation& allocation,
                             const std::string& method) {
  const std::size_t n = workers.size();
  if (allocation.ratios.size() != n || allocation.caps.size() != n ||
      (!allocation.thresholds.empty() && allocation.thresholds.size() != n)) {
    throw std::invalid_argument("allocationToJson: allocation does not match the workers");
  }
  const std::vector<double> shares = normalisedShares(workers);

  double total_ratio = 0.0;
  uint64_t total_caps = 0;
  double total_bytes = 0.0;
  std::vector<double> push_bytes(n);  // each push at its worker's prices
  for (std::size_t i = 0; i < n; ++i) {
    total_ratio += allocation.ratios[i];
    total_caps += allocation.caps[i];
    const PushPrice price = pushPrice(workers[i], budget);
    push_bytes[i] = price.per_push + price.per_coordinate * allocation.caps[i];
    total_bytes += push_bytes[i];
  }
  // Phi of giving every worker the same ratio under the same budget, for scale: the same link
  // seconds for a cost-aware seconds budget, otherwise the same volume.
  const LinkCosts links = budget.packet_bytes > 0 ? linkCosts(workers, budget) : LinkCosts{};
  double phi_uniform = std::nan("");
  if (n > 0 && dim > 0) {
    double even = std::nan("");
    if (method == "cost-aware" && links.known && pricesWholePackets(budget)) {
      // Whole packets: the same number of packets for everyone, as many as the seconds buy,
      // each holding what the sparsest packing of them all holds (the same ratio for all).
      double seconds_per_packet_each = 0.0;
      for (double b : links.per_unit) seconds_per_packet_each += b;
      const double packets =
          std::max(1.0, std::floor(budget.seconds_per_round / seconds_per_packet_each));
      uint32_t sparsest = UINT32_MAX;
      for (const Packing& p : links.packing) {
        sparsest = std::min(sparsest, p.coordinates(static_cast<uint64_t>(packets)));
      }
      even = std::min(1.0, double(sparsest) / dim);
    } else if (method == "cost-aware" && links.known && budget.seconds_per_round > 0.0) {
      double seconds_per_ratio = 0.0;
      for (double b : links.per_coordinate) seconds_per_ratio += b * dim;
      even = std::min(1.0, budget.seconds_per_round / seconds_per_ratio);
    } else if (budget.bytes_per_round > 0.0 || budget.mean_ratio > 0.0) {
      const VolumeBudget volume = volumeBudget(workers, dim, budget);
      even = volume.total / volume.weightSum();
    }
    if (std::isfinite(even)) phi_uniform = keyFactor(shares, std::vector<double>(n, even));
  }

  JsonWriter w;
  w.open('{');
  w.key("method");
  w.text(method);
  w.key("dim");
  w.integer(dim);
  w.key("workers");
  w.integer(n);
  w.key("budget");
  w.open('{');
  w.key("mean_ratio");
  w.number(budget.mean_ratio);
  w.key("bytes_per_round");
  w.number(budget.bytes_per_round);
  w.key("seconds_per_round");
  w.number(budget.seconds_per_round);
  w.key("mean_threshold");
  w.number(budget.mean_threshold);
  w.key("deadline_seconds");
  w.number(budget.deadline_seconds);
  w.key("round_overhead_seconds");
  w.number(budget.round_overhead_seconds);
  w.key("bytes_per_coordinate");
  w.number(budget.bytes_per_coordinate);
  w.key("bytes_per_push");
  w.number(budget.bytes_per_push);
  w.key("packet_bytes");
  w.integer(budget.packet_bytes);
  w.key("whole_packets");
  w.boolean(budget.whole_packets);
  w.close('}');
  w.key("phi");
  w.number(allocation.phi);
  // The key factor of what is sent: the integer caps (at least 1, rounded to the budget) can
  // sit far from the planned ratios when they are a few coordinates each.
  double phi_caps = std::nan("");
  if (n > 0 && dim > 0 && allocation.caps.size() == n) {
    std::vector<double> sent(n);
    for (std::size_t i = 0; i < n; ++i) sent[i] = double(allocation.caps[i]) / double(dim);
    phi_caps = keyFactor(shares, sent);
  }
  w.key("phi_caps");
  w.number(phi_caps);
  w.key("phi_uniform");
  w.number(phi_uniform);
  w.key("total_ratio");
  w.number(total_ratio);
  w.key("total_coordinates");
  w.integer(total_caps);
  w.key("total_bytes");
  w.number(total_bytes);
  w.array("shares", shares);
  w.array("ratios", allocation.ratios);
  w.array("caps", allocation.caps);
  w.array("thresholds", allocation.thresholds);
  w.array("push_bytes", push_bytes);
  if (links.known) {
    std::vector<double> seconds(n);
    for (std::size_t i = 0; i < n; ++i) {
      seconds[i] = links.uploadSeconds(i, allocation.caps[i]);
    }
    w.array("upload_seconds", seconds);
  }
  w.close('}');
  return w.take();
}

}  // namespace tern::allocation
