#include "runner.hpp"

#include <chrono>

#include "sim/simulator.hpp"

namespace tern::bench::dagc {

RunResult runOne(const RunSpec& spec, const Training& training, const DataFiles& data) {
  const auto t0 = std::chrono::steady_clock::now();
  RunResult result;
  result.spec = spec;
  sim::Simulator simulator(simSettings(spec, training, data));
  const auto sim = simulator.run([&](const server::RoundRecord& r) {
    if (!r.evaluated) return;
    EvalPoint p{r.round + 1, r.time_s, r.test_accuracy, r.upload_bytes};
    result.curve.push_back(p);
    if (!result.rounds_to_target && p.accuracy >= spec.target) {
      result.rounds_to_target = p.rounds;
      result.seconds_to_target = p.seconds;
    }
  });
  result.final_accuracy = sim.last.test_accuracy;
  result.upload_bytes = sim.last.upload_bytes;
  result.rounds_run = sim.last.round + 1;
  result.sim_seconds = sim.last.time_s;
  result.replica_mismatches = sim.replica_mismatches;
  for (const auto& w : sim.last.workers) {
    result.final_caps.push_back(w.cap);
    result.final_shares.push_back(w.share);
    result.final_link_b.push_back(w.link.b_seconds_per_packet());
    result.final_link_a.push_back(w.link.a_seconds());
  }
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace tern::bench::dagc
