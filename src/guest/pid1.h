// What abox-guest does as init (PID 1, stage 2): the mounts a minimal system needs, hostname,
// loopback, taking over signals, and the orderly power-off. PID 1 must never exit (the kernel
// panics), so the failure paths here end in a power-off instead.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/unique_fd.h"

namespace abox::guest {

inline constexpr char kHostname[] = "abox";
// After SIGTERM to every process at shutdown, how long they get before SIGKILL.
inline constexpr int kShutdownGraceMs = 1000;

// Mounts what is missing of /proc, /sys, /dev (devtmpfs), /dev/pts (devpts, ptmxmode=0666,
// gid=5, mode=0620), /dev/shm and /tmp (tmpfs, 1777); creates /dev/fd and /dev/std* links; sets
// the hostname; brings up `lo`; disables Ctrl-Alt-Del. Each failure is logged and the rest
// continues (a command may still run without /dev/shm); returns the first failure.
absl::Status SetUpSystem();

// True when we are the machine's init (the VM), false when PID 1 of a PID namespace inside
// another system (a container in tests): machine-wide setup (routes, firewall) is skipped there.
bool IsMachineInit();

// Blocks SIGCHLD and the termination signals (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1/2,
// SIGPWR) and returns a non-blocking signalfd for them. PID 1 reaps on SIGCHLD and ignores the
// rest; outside PID 1 the agent ends cleanly on SIGTERM/SIGINT/SIGHUP.
[[nodiscard]] absl::StatusOr<base::UniqueFd> TakeOverSignals();

// Orderly power-off: SIGTERM to every process, kShutdownGraceMs to exit (reaping), SIGKILL,
// sync, remount / read-only, reboot(RB_POWER_OFF).
[[noreturn]] void PowerOff();

// Logs why the agent cannot continue and powers off.
[[noreturn]] void PowerOffAfterFailure(absl::string_view why);

}  // namespace abox::guest
