#include "common/daemon/descriptor_limit.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace tern::daemon {

uint64_t raiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  constexpr rlim_t kMost = rlim_t(1) << 20;
  const rlim_t wanted = limit.rlim_max == RLIM_INFINITY ? kMost : std::min(limit.rlim_max, kMost);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    rlimit raised = limit;
    raised.rlim_cur = wanted;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? uint64_t(kMost) : uint64_t(limit.rlim_cur);
}

}  // namespace tern::daemon
