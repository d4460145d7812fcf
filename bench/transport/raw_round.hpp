#pragma once
// The physical reference for a tern round: one ROUTER and N DEALERs on loopback TCP in this
// process, each round the ROUTER sends every DEALER `down_bytes` and waits for `up_bytes` back
// from each. No protocol, no computation: what moving a round's bytes costs libzmq.
#include <cstddef>

namespace tern::bench {

struct RawPattern {
  size_t workers = 4;
  size_t down_bytes = 0;  // per worker per round
  size_t up_bytes = 0;    // per worker per round
  int rounds = 30;        // timed rounds, after `warmup` untimed ones
  int warmup = 10;
};

// Mean wall milliseconds per timed round.
double rawRoundMs(const RawPattern& p);

}  // namespace tern::bench
