// Stage 1 of abox-guest: runs as /init in the initramfs, brings up the root disk and
// re-executes abox-guest from it as stage 2 (the agent). Only libc calls; linked statically.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace abox::guest {

// Where stage 1 installs the agent on the new root (a root-only tmpfs, so the unprivileged
// `agent` user cannot replace it) and the argument that selects stage 2.
inline constexpr char kStage2Path[] = "/run/abox/abox-guest";
inline constexpr char kStage2Flag[] = "--stage2";

// True when this process is PID 1 and /abox/initramfs exists (the initramfs marker).
[[nodiscard]] bool IsInitramfsStage();

// Mounts /dev (devtmpfs), /proc, /sys; loads /abox/modules/*.ko in name order (finit_module,
// EEXIST ignored); waits up to 5 s for the root disk (/dev/vda, or abox.root= on the kernel
// command line); mounts it ext4 read-write on /newroot, a tmpfs (0755) on /newroot/run; copies
// /init to /newroot/run/abox/abox-guest (root:root 0755); frees the initramfs files; moves
// /dev, /proc, /sys into /newroot; switches root; execs "abox-guest --stage2". Returns only on
// failure, with a status naming the step that failed.
[[nodiscard]] absl::Status Stage1();

// Runs Stage1(); on failure writes "abox-guest: stage1: <what failed>" to the console and
// powers the VM off (QEMU runs with -no-reboot, so the VM ends either way).
[[noreturn]] void RunStage1();

// Writes "abox-guest: stage1: <message>" to the console, syncs and powers off.
[[noreturn]] void Stage1Fail(absl::string_view message);

// Helpers, exposed for tests.

// The root device from a kernel command line: the value of abox.root=, else "/dev/vda".
[[nodiscard]] std::string RootDeviceFromCmdline(absl::string_view cmdline);

// The module files in `dir` (names ending in ".ko"), sorted by name, as full paths.
[[nodiscard]] std::vector<std::string> ListModuleFiles(const std::string& dir);

}  // namespace abox::guest
