// The daemon's listening sockets, set up with plain syscalls (close-on-exec, non-blocking):
// the per-user unix socket with its stale/live-daemon handling, and the loopback TCP port.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::http {

// The lock that says this process serves a unix socket path: flock(LOCK_EX) on "<path>.lock",
// with the holder's pid written in it (for messages and `abox daemon stop`). aboxd takes it
// before anything else, so that a second aboxd leaves before it touches the state.
struct UnixSocketLock {
  base::UniqueFd fd;
  std::string path;  // the socket's absolute path
};

// A bound, listening unix socket and the lock that says this process serves it.
struct UnixListenSocket {
  base::UniqueFd fd;
  base::UniqueFd lock;  // flock(LOCK_EX) on "<path>.lock", held for the daemon's lifetime
  std::string path;
  dev_t dev = 0;  // identity of the socket file we bound, so that cleanup never removes a
  ino_t ino = 0;  // successor's socket
};

// Takes the lock of the socket at `path`:
//  - creates missing parent directories with mode 0700; refuses a parent owned by another
//    (non-root) user;
//  - takes an exclusive lock on "<path>.lock": held by a live daemon -> kAlreadyExists
//    ("another aboxd (pid N) already serves <path>; ...").
[[nodiscard]] absl::StatusOr<UnixSocketLock> LockUnixSocket(const std::string& path);

// Listens on the socket whose lock the caller holds (which the result keeps):
//  - an existing socket file that still accepts connections -> kAlreadyExists (another server
//    answers there); one that refuses them is stale (its daemon died) and is replaced; any
//    other kind of file -> kFailedPrecondition;
//  - binds, chmods the socket to 0600 and listens.
// Paths longer than sun_path are reached through /proc/self/fd/<dir fd>.
[[nodiscard]] absl::StatusOr<UnixListenSocket> ListenUnix(UnixSocketLock lock, int backlog);

// Removes the socket file if it is still the one `socket` bound (the lock file stays; it is
// harmless and removing it would race with a successor taking it).
void RemoveUnixSocketFile(const UnixListenSocket& socket);

// Listens on 127.0.0.1:`port` (0 = any free port); `*bound_port` receives the actual port.
// kAlreadyExists saying what to do when the port is taken.
[[nodiscard]] absl::StatusOr<base::UniqueFd> ListenLoopback(uint16_t port, int backlog,
                                                            uint16_t* bound_port);

}  // namespace abox::http
