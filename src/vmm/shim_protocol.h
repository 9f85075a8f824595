// What QemuVmm (the caller) and abox-shim (the per-VM supervisor) exchange: the run_dir
// layout, the shim's configuration (shim.json), the readiness message on a pipe, and the VM
// state the shim keeps in state.json. All JSON is parsed without exceptions and type-checked:
// the run_dir is private (0700) but a bad file must give an error, not a crash.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/vmm/qemu_argv.h"
#include "src/vmm/vmm.h"

namespace abox::vmm {

// Files in a VM's run_dir.
inline constexpr char kOverlayFile[] = "overlay.qcow2";
inline constexpr char kQmpSocket[] = "qmp.sock";
inline constexpr char kAgentSocket[] = "agent.sock";
inline constexpr char kConsoleLog[] = "console.log";
inline constexpr char kQemuLog[] = "qemu.log";  // QEMU's stderr, bounded
inline constexpr char kShimLog[] = "shim.log";  // the shim's own stderr
inline constexpr char kStateFile[] = "state.json";
inline constexpr char kShimConfigFile[] = "shim.json";

// At most this many frozen disk layers under a VM's overlay.
inline constexpr size_t kMaxDiskLayers = 16;

[[nodiscard]] std::string RunDirPath(const std::string& run_dir, const char* name);

struct ShimConfig {
  std::string id;
  std::string run_dir;
  std::string qemu_binary;
  // abox-jail (jail.h), which QEMU is exec'd through.
  std::string jail_binary;
  // false (ABOX_JAIL=off, for measurements only): no namespaces, no new root, no per-VM uid;
  // QEMU still drops to `drop` and keeps its seccomp filter.
  bool jail = true;
  // With the jail: the CLONE_NEW* flags QEMU is cloned into (JailNamespaces). Where the host
  // refuses them, QEMU starts without them and state.json says so.
  uint64_t namespaces = 0;
  Accel accel = Accel::kTcg;
  std::string accel_note;
  int cpus = 1;
  int memory_mib = 512;
  std::string kernel;
  std::string initrd;
  std::string rootfs;  // golden image; the overlay is run_dir/overlay.qcow2
  // Frozen qcow2 disks between rootfs and the overlay, lowest first (see VmSpec::disk_layers).
  std::vector<std::string> disk_layers;
  // >= 0: the shim inherited the guest memory file at this descriptor (VmSpec::memory_file).
  int memory_fd = -1;
  bool memory_shared = false;
  // QEMU waits for a saved state instead of booting.
  bool incoming = false;
  std::string kernel_cmdline;
  std::optional<PrivilegeDrop> drop;
  uint64_t console_log_limit = 1 << 20;
  uint64_t qemu_log_limit = 1 << 20;
  int64_t ready_timeout_ms = 10000;
  bool tie_to_caller = true;
};

[[nodiscard]] std::string ShimConfigToJson(const ShimConfig& config);
[[nodiscard]] absl::StatusOr<ShimConfig> ShimConfigFromJson(const std::string& text);

// The one line the shim writes to its readiness pipe.
struct ShimReady {
  bool ok = false;
  std::string error;  // why the VM did not come up (QEMU's stderr tail included)
  pid_t shim_pid = 0;
  pid_t qemu_pid = 0;
};

[[nodiscard]] std::string ShimReadyToJson(const ShimReady& ready);
[[nodiscard]] absl::StatusOr<ShimReady> ShimReadyFromJson(const std::string& text);

enum class VmPhase { kStarting, kRunning, kExited };

struct VmState {
  std::string id;
  VmPhase phase = VmPhase::kStarting;
  pid_t shim_pid = 0;
  pid_t qemu_pid = 0;
  Accel accel = Accel::kTcg;
  std::string accel_note;
  bool tie_to_caller = true;
  // How QEMU is confined, in words, e.g. "uid 2047541249, gid 2047541249; namespaces: mnt pid
  // ipc uts net cgroup; root: a read-only tmpfs" or, where the host lacks something, why not.
  std::string privileges;
  int64_t started_at_ms = 0;  // Unix time
  // Set once phase is kExited.
  std::optional<int> exit_code;
  std::optional<int> exit_signal;
  std::string exit_reason;
  int64_t exited_at_ms = 0;
};

[[nodiscard]] std::string VmStateToJson(const VmState& state);
[[nodiscard]] absl::StatusOr<VmState> VmStateFromJson(const std::string& text);
// Atomic write / bounded read of run_dir/state.json.
[[nodiscard]] absl::Status WriteVmState(const std::string& run_dir, const VmState& state);
[[nodiscard]] absl::StatusOr<VmState> ReadVmState(const std::string& run_dir);

}  // namespace abox::vmm
