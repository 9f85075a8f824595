// abox-shim: one small supervisor process per VM, between the caller and QEMU.
//
// It owns QEMU (its only child, which gets SIGKILL if the shim dies), keeps the bounded serial
// console log and QEMU's bounded stderr log, and records the VM's state in run_dir/state.json.
// It exists so that
//   - a console log exists even when nobody else is reading;
//   - with tie_to_caller, QEMU never outlives the process that started it, even if that process
//     is SIGKILLed: the caller holds the write end of a pipe whose read end the shim watches;
//     EOF means the caller is gone, and the shim quits/kills QEMU and removes the run_dir;
//   - without tie_to_caller, the VM outlives the caller (the shim detaches into its own process
//     tree) and can be re-attached from state.json.
// Signals: SIGTERM/SIGINT/SIGHUP kill QEMU at once (SIGKILL), record the exit and leave the
// run_dir to the caller. Trust: the config comes from the caller (trusted); console and QEMU
// output are untrusted bytes that are only ever stored, bounded.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "src/base/child_process.h"

namespace abox::vmm {

struct ShimArgs {
  std::string run_dir;  // holds shim.json
  int ready_fd = -1;    // gets one ShimReady JSON line, then is closed
  int caller_fd = -1;   // tie_to_caller: read end of the caller's pipe
};

// abox-shim --run-dir DIR --ready-fd N [--caller-fd N]
[[nodiscard]] absl::StatusOr<ShimArgs> ParseShimArgs(int argc, const char* const* argv);

// Why QEMU ended, in words, for state.json: from its exit status, refined by the guest's last
// console lines (a kernel panic, a power-off) and QEMU's last stderr line. Console text is
// guest-controlled, so it only ever selects or annotates the message.
[[nodiscard]] std::string DescribeQemuExit(const base::ExitStatus& status,
                                           const std::string& console_tail,
                                           const std::string& qemu_log_tail);

// Runs the supervisor to the end; returns the process exit status.
[[nodiscard]] int RunShim(const ShimArgs& args);

}  // namespace abox::vmm
