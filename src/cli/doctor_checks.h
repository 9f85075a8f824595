// The check groups of `abox doctor`, each a function of the host view (doctor_check.h) and of
// what the daemon said, so that tests run them against fake /proc trees without a daemon.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "src/api/system.h"
#include "src/cli/doctor_check.h"
#include "src/vmm/kvm_probe.h"

namespace abox::cli {

// --- host: KVM, QEMU and its seccomp, user namespaces, cgroups, disk space ---------------------

struct HostCheckOptions {
  std::string home;  // $ABOX_HOME
  std::string qemu_binary = "qemu-system-x86_64";
  std::optional<std::string> env_accel;  // $ABOX_ACCEL
  // The KVM verdict abox's probe gave (cached) or gives now; nullopt when none is known (e.g.
  // --quick and nothing cached). Called only when /dev/kvm opens.
  std::function<std::optional<vmm::KvmVerdict>()> kvm_verdict;
};
[[nodiscard]] std::vector<Check> HostChecks(const HostView& host, const HostCheckOptions& options);

// --- daemon: socket and directory, state file modes, TCP listener and token --------------------

struct DaemonFacts {
  std::string socket_path;
  std::string home;
  // Health from GET /v1/health, or why it could not be had (`not_running`: nothing listens).
  std::optional<api::Health> health;
  absl::Status error;
  bool not_running = false;
};
[[nodiscard]] std::vector<Check> DaemonChecks(const HostView& host, const DaemonFacts& facts);
// secrets.store: the 0600 value file aboxd keeps in `home`/secrets when no keyring answers.
[[nodiscard]] Check SecretFileCheck(const HostView& host, const std::string& home);
// secrets.ca_key: $ABOX_HOME/ca/ca.key (the interception CA's key) is the user's alone.
[[nodiscard]] Check CaKeyCheck(const HostView& host, const std::string& home);

// The TCP sockets process `pid` listens on, as "127.0.0.1:8080" / "[::1]:8080", read from its
// descriptors and /proc/<pid>/net/tcp{,6}.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> TcpListeners(const HostView& host,
                                                                    int64_t pid);

// --- sandbox: each running QEMU's confinement as /proc shows it --------------------------------

struct SandboxFacts {
  std::string id;
  std::string name;
  int64_t vmm_pid = 0;
  std::string run_dir;  // $ABOX_HOME/sandboxes/<id>
  // $ABOX_HOME/images (and where it resolves to), templates and checkpoints: what QEMU may hold
  // read-only besides its run dir.
  std::vector<std::string> image_dirs;
  std::string egress_mode;  // none | allowlist | open | ""
};
// sandbox.<id>.{process,uid,namespaces,root,limits,seccomp,no_new_privs,capabilities,cgroup,
// environment,descriptors,network}, and egress.<id>.mode. What the QEMU jail (decision 0021,
// src/vmm/jail.h) gives is checked as /proc shows it: .uid passes for a per-VM uid (as root) or
// for the caller's uid in a user namespace of QEMU's own (not root), fails for root; .namespaces
// passes when mnt, pid, net, ipc, uts (cgroup where the kernel has it, user when not root) are
// QEMU's own; .root when QEMU's root is the jail's small one, not the host's; .limits when core
// dumps are off and open files (processes, for a per-VM uid) are bounded. A QEMU without its
// jail (the host refused namespaces, ABOX_JAIL=off) gets warnings saying so. .cgroup stays a
// warning while abox sets no per-VM cgroup limits.
[[nodiscard]] std::vector<Check> SandboxChecks(const HostView& host, const SandboxFacts& facts);

// One inspected sandbox: its facts and SandboxChecks' results.
struct InspectedSandbox {
  SandboxFacts facts;
  std::vector<Check> checks;
};
// Fails the .uid checks of sandboxes whose QEMUs run as the same per-VM uid (each reason names
// the other sandboxes): abox leases every running QEMU a uid of its own.
void FailSharedVmUids(std::vector<InspectedSandbox>& sandboxes);

// Whether an environment variable's name looks like a secret (API keys, tokens, agent sockets).
[[nodiscard]] bool SecretLookingVariable(const std::string& name);

// --- the residual risks that hold, given the checks --------------------------------------------

// The risks that hold on this host: those the jail does not remove (no per-VM cgroup limits;
// what QEMU's root and /proc still show it), those a running sandbox's checks show (a QEMU
// without its namespaces, root or uid of its own; one running as root), and those of egress and
// secrets by design. `euid` is the user's (doctor's).
[[nodiscard]] std::vector<Risk> ResidualRisks(const std::vector<Check>& checks, uid_t euid);

}  // namespace abox::cli
