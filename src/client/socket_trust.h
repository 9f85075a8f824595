// Whether the server on aboxd's socket path is the user's own aboxd, before a byte is sent.
//
// Trust boundary: the socket path is a name in the file system, and whoever controls its
// directory controls what listens there. A client that trusted any listener would hand another
// user its requests (workspace paths, commands, stdin) and believe their answers (a forged diff
// that `abox apply` then writes). So every connection checks, in this order:
//   1. the socket's directory belongs to the user (euid) and is closed to everybody else (no
//      group or other permission bits: the 0700 aboxd creates), checked on the descriptor the
//      connection then goes through (/proc/self/fd/<dir>/<name>), so a directory swapped after the
//      check is not the one connected through;
//   2. the listening process runs as the user (SO_PEERCRED, which for a server gives the
//      credentials of the process that called listen()).
// `abox daemon stop` further checks that the pid SO_PEERCRED names is an aboxd of this user
// before it signals it (VerifyAboxdProcess).
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/unique_fd.h"

namespace abox::client {

// The process at the other end of a connected unix socket, as the kernel recorded it.
struct PeerCredentials {
  pid_t pid = 0;  // 0 when the peer lives in a pid namespace this process cannot see
  uid_t uid = 0;
  gid_t gid = 0;
};

// SO_PEERCRED of `fd`.
[[nodiscard]] absl::StatusOr<PeerCredentials> SocketPeer(int fd);

// Checks that the directory open at `dir_fd` (any open mode, O_PATH too) is owned by `uid` and
// grants nothing to group or others. `dir` and `socket_path` name them in the error, which says
// what to do (kPermissionDenied).
[[nodiscard]] absl::Status CheckSocketDirectory(int dir_fd, const std::string& dir,
                                                const std::string& socket_path, uid_t uid);

// Checks that the server at the other end of the connected socket `fd` runs as `uid`
// (kPermissionDenied naming its uid and pid otherwise).
[[nodiscard]] absl::Status CheckSocketPeer(int fd, const std::string& socket_path, uid_t uid);

// Connects a non-blocking, close-on-exec unix stream socket to `path` after check 1 and returns
// it after check 2 above, both against geteuid(). While the server's backlog is full, retries
// until `deadline`. When nothing listens there (no directory, no socket, ECONNREFUSED) the error
// carries the mark IsNothingListening() (http_connection.h) looks for. `peer`, when given,
// receives the server's credentials.
[[nodiscard]] absl::StatusOr<base::UniqueFd> ConnectToOwnServer(const std::string& path,
                                                                absl::Time deadline,
                                                                PeerCredentials* peer = nullptr);

// `status` marked as "nothing listens on the socket", and whether a status carries that mark.
[[nodiscard]] absl::Status MarkNothingListening(absl::Status status);
[[nodiscard]] bool HasNothingListeningMark(const absl::Status& status);

// Checks, for `abox daemon stop`, that process `pid` belongs to `uid` (/proc/<pid> is owned by
// it) and runs an aboxd: its executable is named `aboxd`, or is `expected_binary` (the aboxd abox
// would start, e.g. $ABOXD_BIN; "" for none). kPermissionDenied or kFailedPrecondition naming
// what it found otherwise; kNotFound when the process is gone.
[[nodiscard]] absl::Status VerifyAboxdProcess(pid_t pid, uid_t uid,
                                              const std::string& expected_binary);

}  // namespace abox::client
