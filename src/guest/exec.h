// Spawning commands for exec streams: environment, PATH search with execvp semantics, user
// switching, a new session (so signals and timeouts reach the whole process group), pipes or a
// PTY for stdio, and precise reports of why a command could not start.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/base/child_process.h"
#include "src/base/unique_fd.h"
#include "src/guest/user.h"
#include "src/proto/messages.h"

namespace abox::guest {

// PATH for every command unless the request overrides it.
inline constexpr char kDefaultPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// The proxy environment every command gets (see EgressPorts): HTTP_PROXY, HTTPS_PROXY and their
// lowercase forms, and NO_PROXY / no_proxy for loopback.
inline constexpr char kGuestHttpProxy[] = "http://127.0.0.1:3128";
inline constexpr char kGuestNoProxy[] = "localhost,127.0.0.1,::1";
// Exit codes when the command could not run (shell convention).
inline constexpr int kExitNotFound = 127;
inline constexpr int kExitCannotRun = 126;
// Group owning PTY slaves (devpts is mounted with gid=5).
inline constexpr gid_t kTtyGid = 5;

struct SpawnSpec {
  std::vector<std::string> argv;      // argv[0] is searched in PATH unless it contains a '/'
  std::vector<std::string> env;       // the complete environment, NAME=value
  std::string path;                   // PATH used for the search (the one in `env`)
  std::string cwd;                    // working directory (absolute)
  std::optional<Identity> switch_to;  // set: setgroups/setgid/setuid in the child (needs root)
  bool stdin_pipe = false;            // stdin from a pipe; otherwise /dev/null (or the PTY)
  std::optional<proto::PtySize> pty;  // stdin/stdout/stderr on a new PTY
  int cgroup_procs_fd = -1;           // >= 0: the child joins that cgroup first (ExecCgroup)
  // A /proc/vmstat whose OOM kill counter is read at the start (oom_kills.h); empty: the kills
  // during the command are not counted.
  std::string oom_counter_path;
};

// The base environment (PATH, HOME, USER, LOGNAME, SHELL, LANG, the proxy variables, TERM with a
// PTY) overlaid with the request's variables, and the argv (`shell` runs through /bin/sh -c).
SpawnSpec BuildSpawnSpec(const proto::ExecRequest& request, const Identity& identity,
                         bool switch_user);

struct SpawnedProcess {
  pid_t pid = -1;             // also the process group and session id
  base::UniqueFd pidfd;       // readable once the process exits
  base::UniqueFd stdin_fd;    // non-blocking writer (pipe or PTY master); invalid for /dev/null
  base::UniqueFd stdout_fd;   // non-blocking reader (pipe or PTY master)
  base::UniqueFd stderr_fd;   // non-blocking reader; invalid with a PTY
  base::UniqueFd pty_master;  // for TIOCSWINSZ; invalid without a PTY
  std::chrono::steady_clock::time_point started;  // just before fork()
  // SpawnSpec::oom_counter_path, and the OOM kill counter read from it just before fork()
  // (nullopt: not counted), so that the stream can count the kills during the command.
  std::string oom_counter_path;
  std::optional<uint64_t> oom_kill_counter;
  // Non-empty when the command could not start ("foo: command not found"); the child then
  // exits with kExitNotFound or kExitCannotRun.
  std::string error;
};

// Starts the command. Fails only when the resources for it cannot be created (pipes, PTY,
// fork); a command that cannot be executed is a started process with `error` set.
[[nodiscard]] absl::StatusOr<SpawnedProcess> Spawn(const SpawnSpec& spec);

// Non-blocking reap of exactly the process behind `pidfd` (no pid-reuse races).
std::optional<base::ExitStatus> TryReapPidfd(int pidfd);
// Converts a waitpid() status.
base::ExitStatus FromWaitStatus(int wait_status);

}  // namespace abox::guest
