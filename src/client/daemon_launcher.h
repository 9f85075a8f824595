// Finding, starting and stopping aboxd, the per-user daemon the CLI talks to.
//
// The daemon holds an exclusive flock on "<socket>.lock" for its lifetime and writes its pid
// there ("<pid>\n", see src/http/listen_socket.cc); that lock says whether a daemon runs.
// Which process to signal comes from the socket itself (SO_PEERCRED), never from the file alone.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/api/system.h"
#include "src/client/api_client.h"

namespace abox::client {

struct DaemonOptions {
  std::string socket_path;  // where aboxd listens (base::ResolveSocketPath())
  std::string log_path;     // aboxd's stdout and stderr when abox starts it (appended, 0600)
  // The aboxd executable; empty: $ABOXD_BIN, else next to the running abox binary.
  std::string aboxd_binary;
  // More aboxd flags, after --socket PATH (e.g. --max-cpus 4).
  std::vector<std::string> extra_args;
  // Whether ConnectOrStartDaemon() may start aboxd (env ABOX_NO_AUTOSTART=1 turns it off).
  bool autostart = true;
  absl::Duration start_timeout = absl::Seconds(15);
  absl::Duration stop_timeout = absl::Seconds(30);
  absl::Duration poll_interval = absl::Milliseconds(20);
};

// Options from the environment: the socket from base::ResolveSocketPath(), the log at
// $ABOX_HOME/logs/aboxd.log, autostart unless $ABOX_NO_AUTOSTART is "1".
[[nodiscard]] absl::StatusOr<DaemonOptions> DaemonOptionsFromEnv();

// aboxd's path: options.aboxd_binary, else $ABOXD_BIN, else next to the running binary. The
// error says where it looked.
[[nodiscard]] absl::StatusOr<std::string> FindAboxd(const DaemonOptions& options);

// The command line that runs `binary` for `options`: {binary, "--socket", socket_path,
// extra_args...}. aboxd runs in the foreground, logging to stderr; abox detaches the process
// itself (new session, log file), so aboxd never forks into the background.
[[nodiscard]] std::vector<std::string> AboxdArgv(const std::string& binary,
                                                 const DaemonOptions& options);

// GET /v1/health: the health of a daemon that answers "ok". A daemon that is not running
// gives an error marked IsNothingListening().
[[nodiscard]] absl::StatusOr<api::Health> CheckHealth(ApiClient& client);

// A client of the daemon at options.socket_path. When nothing listens there, starts aboxd
// (StartDaemon) unless options.autostart is off, in which case the error says to run
// `abox daemon start`. Other failures to reach the daemon are returned as they are.
[[nodiscard]] absl::StatusOr<std::unique_ptr<ApiClient>> ConnectOrStartDaemon(
    const DaemonOptions& options);

// Starts aboxd detached (a new session, stdin /dev/null, stdout and stderr appended to the log)
// and polls GET /v1/health until it answers. Returns its pid. kAlreadyExists when a daemon
// already answers. When aboxd exits first or start_timeout passes, the error quotes the last
// lines it logged and names the log file.
[[nodiscard]] absl::StatusOr<pid_t> StartDaemon(const DaemonOptions& options);

// The pid of the daemon that holds the lock of `socket_path`; kNotFound when none does.
[[nodiscard]] absl::StatusOr<pid_t> RunningDaemonPid(const std::string& socket_path);

// The pid of the aboxd that serves options.socket_path, as the kernel tells it (SO_PEERCRED of a
// connection, not the lock file's word), once checked to be this user's process running an
// aboxd (socket_trust.h: VerifyAboxdProcess). kNotFound when no daemon runs; an error saying what
// was found (another user's server, a program that is not aboxd, a lock held while nothing
// listens) otherwise.
[[nodiscard]] absl::StatusOr<pid_t> VerifiedDaemonPid(const DaemonOptions& options);

// Sends SIGTERM to the daemon VerifiedDaemonPid() names (through a pidfd, checked again once
// open, so a reused pid is never signalled) and waits (up to options.stop_timeout) until it has
// released its lock and its socket stopped answering. Its sandboxes keep running: the next aboxd
// re-attaches them. Returns its pid; kNotFound when no daemon runs; kDeadlineExceeded (saying
// how to force it) when it is still there after the timeout.
[[nodiscard]] absl::StatusOr<pid_t> StopDaemon(const DaemonOptions& options);

// The last `max_lines` non-empty lines of the file at `path` from byte `offset` on (at most the
// last 64 KiB), each indented by two spaces; "" when there are none.
[[nodiscard]] std::string LogTail(const std::string& path, off_t offset, int max_lines);

}  // namespace abox::client
