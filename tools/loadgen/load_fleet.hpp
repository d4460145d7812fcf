#pragma once
// Many WorkerCores in one process, each on its own DEALER connection to one coordinator, driven
// by one single-threaded loop: every gradient request is answered at once by a RandomTrainer.
// The cores are the worker daemon's own, so the load speaks the whole protocol (join, welcome,
// heartbeats, pushes, probes, leave) while costing the coordinator what real workers cost it.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/config/settings.hpp"
#include "common/ml/dataset.hpp"
#include "common/transport/channel.hpp"
#include "tools/loadgen/random_trainer.hpp"
#include "worker/worker_core.hpp"

namespace tern::loadgen {

struct FleetOptions {
  size_t workers = 1;
  uint64_t rounds = 0;  // stop once every worker pushed this many rounds (0: until Finish)
  double scale = 1.0;   // the noise's standard deviation
  uint64_t seed = 1;
  std::string prefix = "load";  // worker i is named PREFIX-i
};

// What the run did, printed by tern-loadgen at the end.
struct FleetSummary {
  size_t workers = 0;
  size_t joined = 0;             // workers joined when the run ended
  uint64_t pushes = 0;           // rounds answered, summed over the workers
  uint64_t min_pushes = 0;       // the fewest rounds any one worker answered
  uint64_t rounds_seen = 0;      // distinct rounds started while the run lasted
  double round_ms_median = 0.0;  // between consecutive round starts (first arrivals)
  double round_ms_mean = 0.0;
  double seconds = 0.0;
};

class LoadFleet {
 public:
  // `s` gives the coordinator's endpoint, keys and push settings; every worker shares `shard`
  // (its rows are what each says it holds) and says shard i of N.
  LoadFleet(const config::WorkerSettings& s, std::shared_ptr<const ml::Dataset> shard,
            uint64_t partition, const FleetOptions& options);
  ~LoadFleet();
  // Runs until the rounds are done, every worker finished, or a stop signal; then leaves.
  FleetSummary run();

 private:
  struct Member;
  void dispatch(Member& m, worker::Effects e);
  void send(Member& m, std::vector<Message> out);
  void takeMessages(Member& m);
  void tick();
  bool done() const;
  double nextWakeup() const;
  void noteRound(uint64_t round);
  FleetSummary summary(double seconds) const;

  FleetOptions options_;
  zmq::context_t ctx_;
  std::vector<std::unique_ptr<Member>> members_;
  std::map<uint64_t, double> round_started_;  // round -> when its start first arrived
  uint64_t malformed_ = 0;
};

}  // namespace tern::loadgen
