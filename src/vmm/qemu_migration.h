// Saving and loading a microVM's state over QMP (QEMU's migration to and from a descriptor).
// QEMU 7.2 has no file: target and runs under a seccomp filter that forbids exec:, so the
// caller opens the file and passes the descriptor (getfd); QEMU reads or writes only that.
#pragma once

#include <chrono>

#include "absl/status/status.h"
#include "src/vmm/qmp_client.h"

namespace abox::vmm {

// "stop" / "cont". Resuming after a save reactivates the disks the save handed over; a save
// still in progress (its host died in the middle) is cancelled and waited out first, since its
// completion would stop the VM again.
[[nodiscard]] absl::Status PauseVm(QmpClient& qmp, std::chrono::milliseconds timeout);
[[nodiscard]] absl::Status ResumeVm(QmpClient& qmp, std::chrono::milliseconds timeout);

// Writes the state of the paused VM to `fd` and waits until QEMU says it is complete. With
// skip_shared_memory, memory in a shared file backend is left out (x-ignore-shared). On a
// failure (a full disk, the deadline) the save is cancelled and the VM stays paused.
[[nodiscard]] absl::Status SaveVmState(QmpClient& qmp, int fd, bool skip_shared_memory,
                                       std::chrono::milliseconds timeout);

// Feeds a VM started with `-incoming defer` the state in `fd` and waits until it runs. The
// capability must match the saving side's (QEMU refuses the state otherwise).
[[nodiscard]] absl::Status LoadVmState(QmpClient& qmp, int fd, bool skip_shared_memory,
                                       std::chrono::milliseconds timeout);

}  // namespace abox::vmm
