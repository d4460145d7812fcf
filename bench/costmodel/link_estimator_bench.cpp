// Per-push cost of the online link estimator, side by side with a loop that only sums the same
// samples: the worker calls addSample and fit once per push, so this is what measurement costs
// in CPU. Prints a table (and writes it as CSV when given a path); asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/costmodel/link_estimator.hpp"
#include "common/util/rng.hpp"

namespace {

using tern::costmodel::LinkEstimator;
using tern::costmodel::LinkFit;

constexpr uint32_t kPacket = 1448;
constexpr size_t kSamples = 1 << 13;
constexpr int kRepeats = 31;

struct Sample {
  size_t bytes;
  double seconds;
};

// Keeps the compiler from dropping work whose result is otherwise unused.
template <typename T>
void keep(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

std::vector<Sample> makeSamples(double stall_share, uint64_t seed) {
  tern::Rng rng(seed);
  std::uniform_int_distribution<size_t> packets(1, 64);
  std::normal_distribution<double> jitter(0.0, 0.05);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double a = 0.02, b = kPacket * 8.0 / 8e6;
  std::vector<Sample> out(kSamples);
  for (Sample& s : out) {
    const size_t k = packets(rng);
    s.bytes = k * kPacket;
    s.seconds = (a + b * static_cast<double>(k)) * (1.0 + jitter(rng));
    if (unit(rng) < stall_share) s.seconds *= 10.0 + 40.0 * unit(rng);
  }
  return out;
}

// Best of kRepeats passes over the samples, in nanoseconds per sample.
template <typename Body>
double nsPerSample(const std::vector<Sample>& samples, Body body) {
  double best = 1e300;
  for (int r = 0; r < kRepeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    body(samples);
    const auto stop = std::chrono::steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(stop - start).count();
    best = std::min(best, ns / static_cast<double>(samples.size()));
  }
  return best;
}

struct Row {
  std::string variant;
  double ns = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
    std::printf(
        "usage: %s [CSV]\nPer-push CPU cost of the link estimator; the table also goes to "
        "CSV when given.\n",
        argv[0]);
    return argc == 2 && std::string(argv[1]) == "--help" ? 0 : 2;
  }
  const std::vector<Sample> clean = makeSamples(0.0, 1);
  const std::vector<Sample> stalled = makeSamples(0.10, 2);

  std::vector<Row> rows;
  rows.push_back({"sum bytes and seconds (baseline)", nsPerSample(clean, [](const auto& v) {
                    double bytes = 0, seconds = 0;
                    for (const Sample& s : v) {
                      bytes += static_cast<double>(s.bytes);
                      seconds += s.seconds;
                      keep(seconds);
                    }
                    keep(bytes);
                  })});
  rows.push_back({"addSample", nsPerSample(clean, [](const auto& v) {
                    LinkEstimator est;
                    for (const Sample& s : v) est.addSample(s.bytes, s.seconds);
                    keep(est.fit().b);
                  })});
  rows.push_back({"addSample + fit", nsPerSample(clean, [](const auto& v) {
                    LinkEstimator est;
                    for (const Sample& s : v) {
                      est.addSample(s.bytes, s.seconds);
                      const LinkFit f = est.fit();
                      keep(f.b);
                    }
                  })});
  rows.push_back({"addSample + fit, 10% stalls", nsPerSample(stalled, [](const auto& v) {
                    LinkEstimator est;
                    for (const Sample& s : v) {
                      est.addSample(s.bytes, s.seconds);
                      const LinkFit f = est.fit();
                      keep(f.b);
                    }
                  })});
  rows.push_back({"addSample + fit + probeToSend", nsPerSample(clean, [](const auto& v) {
                    LinkEstimator est;
                    double now = 0;
                    for (const Sample& s : v) {
                      est.addSample(s.bytes, s.seconds);
                      const LinkFit f = est.fit();
                      keep(f.b);
                      now += 0.1;
                      auto probe = est.probeToSend(now);
                      keep(probe);
                    }
                  })});

  const double baseline = rows.front().ns;
  // The cheapest push there is: one packet's serialisation at 1 Gbit/s.
  const double one_packet_ns = kPacket * 8.0 / 1e9 * 1e9;
  std::printf("link estimator: %zu samples, 1-64 packets, best of %d passes\n", kSamples, kRepeats);
  std::printf("%-34s %12s %16s %24s\n", "variant", "ns/sample", "x baseline",
              "share of 1 pkt @1Gbit/s");
  for (const Row& r : rows) {
    std::printf("%-34s %12.1f %16.1f %23.4f%%\n", r.variant.c_str(), r.ns, r.ns / baseline,
                100.0 * r.ns / one_packet_ns);
  }

  if (argc > 1) {
    std::ofstream csv(argv[1]);
    csv << "variant,ns_per_sample,ratio_to_baseline\n";
    for (const Row& r : rows)
      csv << '"' << r.variant << "\"," << r.ns << ',' << r.ns / baseline << '\n';
  }
  return 0;
}
