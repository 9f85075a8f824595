// abox-jail: what QEMU runs inside, set up between the shim's clone and QEMU's exec
// (decision 0021). The shim clones the child into new namespaces (JailNamespaces); the child
// execs abox-jail with these options, which builds a minimal root in the new mount namespace,
// pivots into it, sets limits, drops every privilege and execs QEMU. QEMU is then the shim's
// direct child (PID 1 of its own PID namespace), so the shim's pid, pidfd and /proc reads are
// QEMU's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace abox::vmm {

// The CLONE_NEW* flags a jailed QEMU is cloned with: mount, PID, IPC, UTS, network and cgroup
// namespaces, and a user namespace when abox does not run as root (as root, a uid of its own
// stands in for it; decision 0021).
[[nodiscard]] unsigned long JailNamespaces(bool as_root);  // NOLINT(google-runtime-int)

// The limits a VM's QEMU gets (JailOptionsFor; `abox doctor` checks them): open files, and
// processes (its threads: vCPUs, the I/O pool of up to 64 workers, RCU, migration) when it has a
// per-VM uid, which makes the limit its own.
inline constexpr uint64_t kJailMaxFiles = 4096;
inline constexpr uint64_t kJailMaxProcesses = 256;

// The names of the namespaces in CLONE_NEW* `flags`, e.g. "mnt pid ipc uts net cgroup".
[[nodiscard]] std::string NamespaceNames(uint64_t flags);

// abox's range of per-VM uids (and gids of the same number) when it runs as root: one per
// running QEMU, never shared, from 0x7A0B0000 up (above systemd's container ranges, below 2^31).
inline constexpr uid_t kVmUidBase = 0x7A0B0000;
inline constexpr uint32_t kVmUidCount = 1 << 16;
[[nodiscard]] inline bool IsVmUid(uid_t uid) {
  return uid >= kVmUidBase && uid < kVmUidBase + kVmUidCount;
}

struct JailOptions {
  // As root: the credentials QEMU switches to, a uid of kVmUidBase's range, its gid and the
  // groups it needs (e.g. /dev/kvm's).
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::vector<gid_t> groups;
  // Not root: the process is root of a new user namespace that maps only the caller's uid (the
  // spawn wrote the maps, base::SpawnOptions::namespaces). It stays uid 0 there, the caller's
  // own uid outside, with every capability dropped and the securebits locked so that no exec
  // (QEMU's) gives them back.
  bool user_namespace = false;
  // An existing directory the new root (a small tmpfs) is mounted over, in the jail's own mount
  // namespace; the host sees nothing there. Empty: no new root (no mount namespace).
  std::string new_root;
  // Host directories bound read-only into the new root at the same path (e.g. /usr).
  std::vector<std::string> read_only;
  // Device nodes under /dev bound into the new root's /dev (e.g. null, urandom, kvm).
  std::vector<std::string> devices;
  // Resource limits (soft = hard). 0: left as inherited. RLIMIT_CORE is always 0.
  uint64_t max_files = 0;
  uint64_t max_processes = 0;
  // The hostname in the jail's UTS namespace; empty: not set.
  std::string hostname;
};

// The abox-jail command line for `o`, ending in "--" (QEMU's argv follows).
[[nodiscard]] std::vector<std::string> JailArgv(const std::string& jail_binary,
                                                const JailOptions& o);

// Parses what JailArgv wrote (argv[0] excluded); `*command_start` is the index of QEMU's argv[0].
[[nodiscard]] absl::StatusOr<JailOptions> ParseJailArgv(const std::vector<std::string>& args,
                                                        size_t* command_start);

// Everything abox-jail does before exec, in this process: build and enter the new root, set the
// hostname and limits, drop capabilities and credentials (lock the securebits in a user
// namespace), set no_new_privs and re-arm the parent-death signal. Single-threaded callers only.
absl::Status EnterJail(const JailOptions& o);

}  // namespace abox::vmm
