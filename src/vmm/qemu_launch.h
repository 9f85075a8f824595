// Starting QEMU for the shim: opens every file and socket QEMU needs, builds its argv and spawns
// it, so QEMU itself needs no filesystem access (and can run as nobody).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/base/child_process.h"
#include "src/base/unique_fd.h"
#include "src/vmm/shim_protocol.h"

namespace abox::vmm {

struct LaunchedQemu {
  base::ChildProcess process;
  base::UniqueFd console;  // read end of the serial console (a stream socket)
  base::UniqueFd output;   // read end of QEMU's stdout+stderr
  std::vector<std::string> argv;
};

// Opens kernel, initrd, overlay and golden image, binds qmp.sock and agent.sock in the run_dir
// and starts QEMU with them as inherited descriptors. QEMU gets SIGKILL when the calling
// thread dies (also after a privilege drop: setpriv re-arms it).
[[nodiscard]] absl::StatusOr<LaunchedQemu> LaunchQemu(const ShimConfig& config);

// Removes a run_dir the VMM created: only the files it knows (overlay, sockets, logs, state),
// then the directory itself. Anything else in it makes this fail rather than delete it.
[[nodiscard]] absl::Status RemoveRunDir(const std::string& run_dir);

// Creates run_dir 0700 (and missing parents), or takes an existing empty directory.
[[nodiscard]] absl::Status MakeRunDir(const std::string& run_dir);

}  // namespace abox::vmm
