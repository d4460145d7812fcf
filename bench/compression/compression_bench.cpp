// Throughput and size of every compressor against two references measured on the same arrays in
// the same run (every measurement goes through --arrays independent arrays): a std::nth_element
// top-k (copy |g|, nth_element, one collecting pass) and a plain streaming read (sum) of the array,
// the memory floor. Prints a table and writes CSV; asserts nothing. Columns (issue 3):
//   k               the level asked for, round(ratio * d) (stochastic and threshold send about k;
//                   the dense schemes send all d whatever k is)
//   compress_gbps   fp32 input bytes (4d) per second through compress() (select + encode)
//   decode_gbps     the same 4d bytes per second through decode() of the message
//   bytes_per_kept  message bytes / coordinates sent (d for the dense schemes)
//   entropy_bytes_per_kept  log2(C(d, kept)) / (8 kept) + the value bytes per kept coordinate
//   vs_nth_element  compress time / nth_element top-k time for the same k
//   vs_stream_read  compress time / streaming-read time
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "common/compression/wire_format.hpp"
#include "common/util/rng.hpp"

namespace {

using namespace tern;
using namespace tern::compression;
using Clock = std::chrono::steady_clock;

volatile float g_sink;

// Seconds of fn(): the fastest of at least min_reps runs lasting about min_seconds in total,
// after one untimed warm-up run (first-touch page faults are not what we measure). The minimum,
// not the median: on a shared machine interference only ever adds time, and it adds more of it
// to longer operations, which would bias every ratio against the slower side.
double timeIt(const std::function<void()>& fn, double min_seconds = 0.3, int min_reps = 5,
              int max_reps = 1000) {
  fn();
  std::vector<double> t;
  double total = 0.0;
  while ((int(t.size()) < min_reps || total < min_seconds) && int(t.size()) < max_reps) {
    const auto a = Clock::now();
    fn();
    const double s = std::chrono::duration<double>(Clock::now() - a).count();
    t.push_back(s);
    total += s;
  }
  return *std::min_element(t.begin(), t.end());
}

// Four independent vector accumulators keep the adds off the critical path, so the loop runs
// at memory speed: vector extensions compile to SSE2 on x86-64 and NEON on AArch64.
float streamSum(const float* p, size_t n) {
  typedef float v4 __attribute__((vector_size(16)));
  v4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v4 x0, x1, x2, x3;
    std::memcpy(&x0, p + i, 16);
    std::memcpy(&x1, p + i + 4, 16);
    std::memcpy(&x2, p + i + 8, 16);
    std::memcpy(&x3, p + i + 12, 16);
    a0 += x0;
    a1 += x1;
    a2 += x2;
    a3 += x3;
  }
  const v4 s = (a0 + a1) + (a2 + a3);
  float r = s[0] + s[1] + s[2] + s[3];
  for (; i < n; ++i) r += p[i];
  return r;
}

// The textbook top-k: magnitudes copied out, nth_element for the k-th largest, then one pass
// collecting the indices at or above it (ties beyond k are cut, not ordered by index).
struct NthElementTopK {
  std::vector<float> mags;
  std::vector<uint32_t> out;
  void run(const std::vector<float>& g, size_t k) {
    mags.resize(g.size());
    for (size_t j = 0; j < g.size(); ++j) mags[j] = std::fabs(g[j]);
    std::nth_element(mags.begin(), mags.begin() + ptrdiff_t(k - 1), mags.end(),
                     std::greater<float>());
    const float kth = mags[k - 1];
    out.clear();
    out.reserve(k);
    for (size_t j = 0; j < g.size() && out.size() < k; ++j)
      if (std::fabs(g[j]) >= kth) out.push_back(uint32_t(j));
  }
};

double log2Binomial(double n, double k) {
  return (std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1)) / std::log(2.0);
}

double valueBytesPerKept(const std::string& name, uint32_t qsgd_levels) {
  if (name == "fp16") return 2.0;
  if (name == "sq") return 1.0 / 8.0;
  if (name == "qsgd") return wire::qsgdBitsPerLevel(qsgd_levels) / 8.0;
  return 4.0;
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > start) out.push_back(s.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern compression benchmark: throughput and size per compressor"};
  std::string dims_arg = "100000,1000000,10000000";
  std::string ratios_arg = "0.001,0.01,0.1";
  std::string compressors_arg;
  std::string csv_path;
  uint64_t seed = 1;
  uint32_t qsgd_levels = 16;
  double min_seconds = 0.3;
  uint32_t arrays = 4;
  app.add_option("--dims", dims_arg, "comma-separated dimensions");
  app.add_option("--ratios", ratios_arg, "comma-separated kept ratios k/d");
  app.add_option("--compressors", compressors_arg, "comma-separated names (default: all)");
  app.add_option("--csv", csv_path, "write the rows to this CSV file");
  app.add_option("--seed", seed, "seed of the gaussian test array");
  app.add_option("--qsgd-levels", qsgd_levels, "QSGD levels s");
  app.add_option("--min-seconds", min_seconds, "minimum timed seconds per measurement");
  app.add_option("--arrays", arrays,
                 "independent arrays per dimension; every timing is the mean over them "
                 "(1 = the same array every time, which lets a branch predictor learn it)")
      ->check(CLI::Range(1u, 64u));
  CLI11_PARSE(app, argc, argv);

  std::vector<uint32_t> dims;
  for (const auto& s : splitList(dims_arg)) dims.push_back(uint32_t(std::stoul(s)));
  std::vector<double> ratios;
  for (const auto& s : splitList(ratios_arg)) ratios.push_back(std::stod(s));
  const std::vector<std::string> names =
      compressors_arg.empty() ? compressorNames() : splitList(compressors_arg);

  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    if (!csv) {
      std::fprintf(stderr, "cannot open %s\n", csv_path.c_str());
      return 1;
    }
    csv << "compressor,d,k,compress_gbps,decode_gbps,bytes_per_kept,entropy_bytes_per_kept,"
           "vs_nth_element,vs_stream_read\n";
  }
  std::printf("%-10s %9s %8s %9s %9s %8s %8s %8s %8s\n", "compressor", "d", "k", "comp_GB/s",
              "dec_GB/s", "B/kept", "H_B/kept", "vs_nth", "vs_read");

  for (uint32_t d : dims) {
    // Each timed call goes through every array once and counts as `arrays` calls: fresh data at
    // every call, as a worker sees from round to round, and the time is the mean over arrays
    // (one input can be unusually easy or hard for an algorithm; nth_element's introselect, for
    // one, took 5x longer on one of them).
    std::vector<std::vector<float>> inputs(arrays, std::vector<float>(d));
    for (uint32_t a = 0; a < arrays; ++a) {
      Rng rng(seed + d + 7919ull * a);
      std::normal_distribution<float> n(0.0f, 1.0f);
      for (float& x : inputs[a]) x = n(rng);
    }
    auto perArray = [&](const std::function<void(uint32_t)>& fn) {
      return timeIt(
                 [&] {
                   for (uint32_t a = 0; a < arrays; ++a) fn(a);
                 },
                 min_seconds) /
             arrays;
    };
    const double bytes_in = 4.0 * double(d);
    const double t_read =
        perArray([&](uint32_t a) { g_sink = streamSum(inputs[a].data(), inputs[a].size()); });
    std::vector<float> sorted_mags(d);
    for (uint32_t j = 0; j < d; ++j) sorted_mags[j] = std::fabs(inputs[0][j]);
    std::sort(sorted_mags.begin(), sorted_mags.end(), std::greater<float>());

    for (double ratio : ratios) {
      const uint32_t k = uint32_t(std::clamp<double>(std::llround(ratio * d), 1, d));
      NthElementTopK reference;
      const double t_nth = perArray([&](uint32_t a) { reference.run(inputs[a], k); });
      for (const std::string& name : names) {
        CompressorSpec spec;
        spec.name = name;
        spec.qsgd_levels = qsgd_levels;
        spec.threshold = sorted_mags[k - 1];  // keeps about k coordinates
        auto c = makeCompressor(spec);
        Rng rng(seed);
        std::vector<Compressed> outs(arrays);
        // The threshold's level is a limit on the count: 0 leaves it unlimited.
        const uint32_t level = c->hasLevel() ? k : 0;
        const double t_comp =
            perArray([&](uint32_t a) { outs[a] = c->compress(inputs[a], level, rng); });
        const Compressed& out = outs[0];
        DecodeLimits limits;
        limits.expected_dim = d;
        bool all_decoded = true;
        const double t_dec = perArray([&](uint32_t a) {
          const DecodeResult r = decode(outs[a].bytes, limits);
          all_decoded = all_decoded && r.value && r.value->nonZeros() == outs[a].decoded.nonZeros();
        });
        const size_t kept = out.decoded.nonZeros();
        if (!all_decoded) std::fprintf(stderr, "warning: %s did not decode\n", name.c_str());
        const double bpk = kept ? double(out.bytes.size()) / double(kept) : 0.0;
        const double hpk = kept ? log2Binomial(d, double(kept)) / (8.0 * double(kept)) +
                                      valueBytesPerKept(name, qsgd_levels)
                                : 0.0;
        const double comp_gbps = bytes_in / t_comp / 1e9;
        const double dec_gbps = bytes_in / t_dec / 1e9;
        std::printf("%-10s %9u %8u %9.3f %9.3f %8.4f %8.4f %8.3f %8.3f\n", name.c_str(), d, k,
                    comp_gbps, dec_gbps, bpk, hpk, t_comp / t_nth, t_comp / t_read);
        std::fflush(stdout);
        if (csv)
          csv << name << ',' << d << ',' << k << ',' << comp_gbps << ',' << dec_gbps << ',' << bpk
              << ',' << hpk << ',' << t_comp / t_nth << ',' << t_comp / t_read << '\n';
      }
    }
    std::printf("# d=%u: stream read %.1f us (%.2f GB/s)\n", d, t_read * 1e6,
                bytes_in / t_read / 1e9);
  }
  return 0;
}
