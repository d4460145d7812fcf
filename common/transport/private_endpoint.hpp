#pragma once
// A unix socket endpoint for the ROUTER behind the frame guard that only this user (and root) can
// reach, and the sweep of such endpoints whose coordinator is gone. docs/security.md.
#include <cstddef>
#include <string>

namespace tern::transport {

// "ipc://DIR/router" in a fresh directory (tern-router-XXXXXX) of mode 0700 under the first of
// $RUNTIME_DIRECTORY, $TMPDIR and /tmp that takes one (an abstract socket has no permissions: any
// local user could bypass the guard). The directory is locked (flock) while this lives and removed
// with it; before making its own, the candidates are swept of directories coordinators killed
// without a chance to remove theirs left behind (sweepDeadEndpoints).
class PrivateEndpoint {
 public:
  PrivateEndpoint();  // throws std::runtime_error when no directory can be made or locked
  ~PrivateEndpoint();
  PrivateEndpoint(const PrivateEndpoint&) = delete;
  PrivateEndpoint& operator=(const PrivateEndpoint&) = delete;
  const std::string& endpoint() const { return endpoint_; }
  const std::string& directory() const { return dir_; }
  size_t swept() const { return swept_; }  // dead endpoints' directories removed at construction

 private:
  std::string dir_;
  std::string endpoint_;
  int lock_fd_ = -1;  // the directory, flocked while this lives
  size_t swept_ = 0;
};

// Removes every directory `base`/tern-router-XXXXXX that a coordinator of this user left and no
// process uses: a directory (not a link) owned by this user, of mode 0700, unchanged for
// min_age_seconds, whose lock nobody holds, holding nothing or only a socket `router` nobody
// listens on (a connection refused; one not answered at once counts as alive). Earlier versions'
// `tern-XXXXXX` are removed only when they hold such a socket. Anything else is left as it is.
// Returns how many it removed.
size_t sweepDeadEndpoints(const std::string& base, double min_age_seconds = 60.0);

}  // namespace tern::transport
