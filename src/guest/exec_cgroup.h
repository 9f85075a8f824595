// A cgroup of its own for one command (an exec with kill_leftovers), so that everything it
// starts can be killed at once when it ends, whatever session or process group the processes
// moved to: `setsid daemon &` leaves the process group, but an unprivileged process cannot
// leave the cgroup (its cgroup.procs files are root's). The child joins it (writes "0" to
// cgroup.procs) before it drops privileges; Kill() writes cgroup.kill (Linux 5.14+), which the
// kernel applies to every member, new forks included.
//
// Only PID 1 in the VM uses it (it mounts cgroup v2 at /sys/fs/cgroup); guest root can undo any
// of it, which the host assumes anyway. Not thread-safe per object; the removal of spent
// cgroups is.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::guest {

inline constexpr char kExecCgroupRoot[] = "/sys/fs/cgroup/abox";

class ExecCgroup final {
 public:
  // A new cgroup under `root` (made if missing). kUnavailable when `root`'s parent is not a
  // cgroup v2 file system.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ExecCgroup>> Create(
      const std::string& root = kExecCgroupRoot);
  ExecCgroup(const ExecCgroup&) = delete;
  ExecCgroup& operator=(const ExecCgroup&) = delete;
  // Kills what is left and removes the cgroup once it is empty (now or at a later Create).
  ~ExecCgroup();

  // cgroup.procs, for SpawnSpec::cgroup_procs_fd.
  [[nodiscard]] int procs_fd() const { return procs_.get(); }
  // SIGKILLs every process in the cgroup.
  void Kill();

 private:
  ExecCgroup(std::string dir, base::UniqueFd procs, base::UniqueFd kill)
      : dir_(std::move(dir)), procs_(std::move(procs)), kill_(std::move(kill)) {}

  std::string dir_;
  base::UniqueFd procs_;
  base::UniqueFd kill_;
};

}  // namespace abox::guest
