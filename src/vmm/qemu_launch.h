// Starting QEMU for the shim: opens every file and socket QEMU needs, builds its argv and spawns
// it through abox-jail, so QEMU itself needs no filesystem access (and runs in its jail).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/base/child_process.h"
#include "src/base/unique_fd.h"
#include "src/vmm/jail.h"
#include "src/vmm/shim_protocol.h"

namespace abox::vmm {

struct LaunchedQemu {
  base::ChildProcess process;
  base::UniqueFd console;  // read end of the serial console (a stream socket)
  base::UniqueFd output;   // read end of QEMU's stdout+stderr
  std::vector<std::string> argv;
};

// The jail for `config`'s QEMU: its credentials (config.drop, with the per-VM uid the shim
// leased; or, not root, the caller's own mapped in a user namespace), and with `namespaces` a new
// read-only root over the run_dir holding /usr (and the merged-/usr links), /dev/null, zero,
// urandom (and kvm), its own /proc; limits on files and, with a uid of its own, processes.
[[nodiscard]] JailOptions JailOptionsFor(const ShimConfig& config, bool namespaces);

// Opens kernel, initrd, overlay and golden image, binds qmp.sock and agent.sock in the run_dir
// and starts QEMU with them as inherited descriptors, cloned into `namespaces` (CLONE_NEW*
// flags, JailNamespaces) and exec'd through abox-jail with `jail`. QEMU gets SIGKILL when the
// calling thread dies (abox-jail re-arms it after the credential change). A failure to clone
// into the namespaces reads "clone(new namespaces): ...".
[[nodiscard]] absl::StatusOr<LaunchedQemu> LaunchQemu(
    const ShimConfig& config, const JailOptions& jail,
    unsigned long namespaces);  // NOLINT(google-runtime-int)

// Removes a run_dir the VMM created: only the files it knows (overlay, sockets, logs, state),
// then the directory itself. Anything else in it makes this fail rather than delete it.
[[nodiscard]] absl::Status RemoveRunDir(const std::string& run_dir);

// Creates run_dir 0700 (and missing parents), or takes an existing empty directory.
[[nodiscard]] absl::Status MakeRunDir(const std::string& run_dir);

}  // namespace abox::vmm
