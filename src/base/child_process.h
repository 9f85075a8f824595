#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::base {

// How a child ended: exactly one of exit_code / signal is set.
struct ExitStatus {
  std::optional<int> exit_code;
  std::optional<int> signal;
  // Shell convention: the exit code, or 128 + signal.
  [[nodiscard]] int ShellCode() const { return exit_code ? *exit_code : 128 + signal.value_or(0); }
  [[nodiscard]] std::string ToString() const;
};

// Reaps `pid` if it has exited (waitpid WNOHANG, EINTR retried): its status, or nullopt while
// it runs. A pid that is not our child (reaped elsewhere) reads as exit code 255.
[[nodiscard]] std::optional<ExitStatus> TryReap(pid_t pid);

struct SpawnOptions {
  std::vector<std::string> argv;
  // Full environment; when unset the child inherits ours.
  std::optional<std::vector<std::string>> env;
  // Descriptors for the child's 0/1/2; -1 means /dev/null.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Further descriptors to keep open in the child at the same number (CLOEXEC cleared).
  std::vector<int> keep_fds;
  // Closes every other descriptor in the child before exec (close_range, or a loop up to
  // RLIMIT_NOFILE on kernels without it), not only the close-on-exec ones: a descriptor this
  // process inherited without O_CLOEXEC (from whoever started it) does not reach the child.
  bool close_other_fds = false;
  // Signal the child receives when the spawning thread dies (PR_SET_PDEATHSIG); 0 for none.
  int parent_death_signal = 0;
  // Starts the child in a new session (and so its own process group).
  bool new_session = false;
  // Working directory for the child, if set.
  std::optional<std::string> cwd;
  // CLONE_NEW* flags: the child is created in new namespaces of these kinds (clone(2) instead of
  // fork). With CLONE_NEWPID it is PID 1 of its namespace, and its pid() here is the one this
  // process sees. Spawn fails with the clone's errno (EPERM, EINVAL, ENOSPC, EUSERS) where the
  // host does not allow them, so the caller can fall back and say so. With CLONE_NEWUSER the
  // child maps root of its new user namespace to this process's uid and gid before exec (as
  // `unshare --map-root-user` does), so what it execs keeps its capabilities in the namespace to
  // set the rest up, and is this process's user outside.
  unsigned long namespaces = 0;  // NOLINT(google-runtime-int): clone(2)'s flags type
};

// Owns a child process (pid + pidfd). Destroying a still-running child kills it with SIGKILL and
// reaps it, so no child outlives its owner by accident. Not thread-safe.
class ChildProcess final {
 public:
  // fork (or clone, see SpawnOptions::namespaces) + exec. Everything the child needs is prepared
  // before fork(); between fork and exec only async-signal-safe calls run. Fails if execve fails
  // (reported through a CLOEXEC pipe).
  [[nodiscard]] static absl::StatusOr<ChildProcess> Spawn(const SpawnOptions& options);

  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)),
        pidfd_(std::move(other.pidfd_)),
        status_(std::move(other.status_)) {}
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  [[nodiscard]] pid_t pid() const { return pid_; }
  // Readable when the child exits (for poll loops).
  [[nodiscard]] int pidfd() const { return pidfd_.get(); }
  [[nodiscard]] bool running() const { return pid_ > 0 && !status_.has_value(); }

  // Sends `sig` (no-op once reaped).
  absl::Status Kill(int sig);
  // Non-blocking reap; returns the status once the child has exited.
  std::optional<ExitStatus> TryWait();
  // Waits up to `timeout` (forever when nullopt). kDeadlineExceeded on timeout.
  absl::StatusOr<ExitStatus> Wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Kills with SIGKILL and reaps.
  void KillAndReap();

 private:
  ChildProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::optional<ExitStatus> status_;
};

// Runs a command to completion, capturing stdout (bounded) and stderr (bounded).
struct CommandResult {
  ExitStatus status;
  std::string out;
  std::string err;
};
[[nodiscard]] absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                                       size_t output_limit = 16 << 20);

// Looks `name` up in $PATH (or returns it if it contains a slash and is executable).
[[nodiscard]] std::optional<std::string> FindExecutable(const std::string& name);

}  // namespace abox::base
