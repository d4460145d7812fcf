#pragma once
// Seconds on the monotonic clock: what the daemons inject into the cores (the simulator injects
// its virtual clock instead).
#include <chrono>

namespace tern {

inline double steadySeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace tern
