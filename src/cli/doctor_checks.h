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
// sandbox.<id>.{process,uid,seccomp,no_new_privs,capabilities,namespaces,cgroup,environment,
// descriptors,network}, and egress.<id>.mode.
[[nodiscard]] std::vector<Check> SandboxChecks(const HostView& host, const SandboxFacts& facts);

// Whether an environment variable's name looks like a secret (API keys, tokens, agent sockets).
[[nodiscard]] bool SecretLookingVariable(const std::string& name);

// --- the residual risks that hold, given the checks --------------------------------------------

[[nodiscard]] std::vector<Risk> ResidualRisks(const std::vector<Check>& checks, uid_t euid);

}  // namespace abox::cli
