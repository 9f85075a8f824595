// The QEMU command line for one abox microVM, as a pure function of its inputs, plus the
// privilege-drop plan applied when abox runs as root. No I/O here: the shim opens every file
// and socket and hands QEMU descriptors, so QEMU needs no filesystem access of its own.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/vmm/vmm.h"

namespace abox::vmm {

// Credentials QEMU runs with when abox runs as root (applied by abox-jail before exec, so
// QEMU's own seccomp filter can deny set*id calls; QEMU's `-runas` would need them). With the
// jail on, the shim replaces uid and gid with a per-VM uid it leases (vm_uid.h); nobody:nogroup
// is what every QEMU shares with the jail off (ABOX_JAIL=off, for measurements).
struct PrivilegeDrop {
  uid_t uid = 65534;  // nobody
  gid_t gid = 65534;  // nogroup
  // Supplementary groups, e.g. the group owning /dev/kvm.
  std::vector<gid_t> groups;
};

// What decides the privilege drop; filled from the running host by the caller.
struct PrivilegeInputs {
  uid_t euid = 0;
  Accel accel = Accel::kTcg;
  // /dev/kvm's mode and group, when it exists.
  std::optional<mode_t> kvm_mode;
  gid_t kvm_gid = 0;
};

struct PrivilegePlan {
  std::optional<PrivilegeDrop> drop;
  // Why no drop happens although we are root; empty otherwise.
  std::string warning;
};

// Root -> drop to nobody:nogroup (plus /dev/kvm's group for KVM); non-root -> run as the caller.
// Root with KVM whose /dev/kvm only root can open -> no drop, with a warning saying so.
[[nodiscard]] PrivilegePlan PlanPrivileges(const PrivilegeInputs& in);

// The id of the guest memory backend (and so of its memory block in a saved state).
inline constexpr char kMemoryBackendId[] = "abox.ram";

struct QemuArgvInput {
  std::string qemu_binary = "qemu-system-x86_64";
  // abox-jail's argv ending in "--" (JailArgv), put before QEMU's; empty: QEMU is exec'd as is.
  std::vector<std::string> jail_prefix;
  std::string id;
  Accel accel = Accel::kTcg;  // kKvm or kTcg
  int cpus = 1;
  int memory_mib = 512;
  // Paths QEMU opens for the kernel and initrd (the shim passes /proc/self/fd/N).
  std::string kernel_path;
  std::string initrd_path;
  std::string kernel_cmdline;  // from KernelCmdline()
  // Descriptors QEMU inherits at these numbers.
  int overlay_fd = -1;  // qcow2 overlay, O_RDWR
  int rootfs_fd = -1;   // golden raw image, O_RDONLY
  // Frozen qcow2 disks between the golden image and the overlay, lowest first, O_RDONLY.
  std::vector<int> layer_fds;
  // >= 0: guest memory is this file (reopened as /proc/self/fd/N), mapped shared or private.
  int memory_fd = -1;
  bool memory_shared = false;
  // Wait for migration state (-incoming defer) instead of booting.
  bool incoming = false;
  int qmp_fd = -1;      // listening unix socket for QMP
  int agent_fd = -1;    // listening unix socket for the agent channel
  int console_fd = -1;  // connected stream socket; the serial console is written to it
};

// The full argv (the jail prefix included).
[[nodiscard]] std::vector<std::string> BuildQemuArgv(const QemuArgvInput& in);

// The guest kernel command line: console on ttyS0, boot-time tuning, optional
// tsc_early_khz (needed under TCG), then `extra`.
[[nodiscard]] std::string KernelCmdline(std::optional<uint64_t> tsc_khz, const std::string& extra);

// The kernel command line as a state fingerprint counts it: whether tsc_early_khz is there, not
// its value. Without sysfs the host's TSC is calibrated per process and differs by a few kHz from
// one aboxd to the next; the value only matters to a booting kernel (a restored guest keeps the
// calibration it booted with), so it must not make a saved template stale.
[[nodiscard]] std::string FingerprintKernelCmdline(std::optional<uint64_t> tsc_khz,
                                                   const std::string& extra);

// The whole environment abox-shim and QEMU (also the KVM probe's QEMU) run with, instead of the
// caller's: nothing of the user's (API keys, SSH_AUTH_SOCK, proxies) reaches them. QEMU opens no
// host path by name (the shim hands it descriptors) and spawns nothing, so it needs no HOME or
// TMPDIR; PATH is there for the shim, LANG for messages.
[[nodiscard]] std::vector<std::string> VmmChildEnvironment();

// A QEMU flag that is there for containment, with the reason it is there.
struct HardeningFlag {
  const char* flag;
  const char* value;  // nullptr for a flag without value
  const char* reason;
};
[[nodiscard]] const std::vector<HardeningFlag>& QemuHardeningFlags();

}  // namespace abox::vmm
