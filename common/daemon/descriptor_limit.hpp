#pragma once
// The process's file descriptor limit, raised once by a daemon that holds a connection per peer.
#include <cstdint>

namespace tern::daemon {

// Raises the soft RLIMIT_NOFILE to the hard one (at most 2^20, the kernel's usual nr_open) and
// returns the soft limit then in force (unchanged when it cannot be raised).
uint64_t raiseDescriptorLimit();

}  // namespace tern::daemon
