// The worker's side of the trainer exchange (docs/python.md, "Exchange cost"): binds the real
// ExternalTrainer at ENDPOINT, waits for a trainer's Hello, then times REPEATS gradient requests
// of its layout's size (after 3 warm-up ones), each a FitRequest with the parameters out and the
// trainer's answer parsed, checked and converted back. Prints "worker_side: params= median_ms=
// q1_ms= q3_ms=". Usage: tern-bench-trainer-exchange ENDPOINT [REPEATS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "worker/external_trainer.hpp"

using namespace tern;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tern-bench-trainer-exchange ENDPOINT [REPEATS]\n";
    return 2;
  }
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 50;
  config::TrainerSettings settings;
  settings.kind = "external";
  settings.endpoint = argv[1];
  settings.timeout_seconds = 60.0;
  worker::ExternalTrainer trainer(settings, int64_t{1} << 31);
  const auto data = trainer.waitForHello([] { return false; });
  if (!data) return 1;
  const auto n = size_t(ml::paramsOf(data->tensors));
  worker::GradientRequest request;
  request.params = std::make_shared<const std::vector<float>>(n, 0.5f);
  request.plan = {32, 2, 0.1, 1};  // local steps: the answer is a delta, divided back
  std::vector<double> ms;
  for (int i = 0; i < repeats + 3; ++i) {
    request.id = uint64_t(i) + 1;
    request.round = uint64_t(i);
    const auto t0 = std::chrono::steady_clock::now();
    const auto result = trainer.gradient(request);
    const auto t1 = std::chrono::steady_clock::now();
    if (!result || !result->failure.empty() || result->gradient.size() != n) {
      std::cerr << "request " << i << " failed: " << (result ? result->failure : "stopped") << '\n';
      return 1;
    }
    if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) { return ms[size_t(q * double(ms.size() - 1))]; };
  std::printf("worker_side: params=%zu median_ms=%.3f q1_ms=%.3f q3_ms=%.3f\n", n, at(0.5),
              at(0.25), at(0.75));
  return 0;
}
