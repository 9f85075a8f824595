// The VMM interface: what the rest of abox needs from a virtual machine monitor, with no QEMU
// detail in it, so Firecracker / Cloud Hypervisor / libkrun drivers can implement it too.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace abox::vmm {

// Hardware acceleration. kAuto lets the driver decide (e.g. probe-boot KVM, else emulate).
enum class Accel { kAuto, kKvm, kTcg };

// "auto" / "kvm" / "tcg".
[[nodiscard]] const char* AccelName(Accel accel);
// Parses "auto" / "kvm" / "tcg" (case-sensitive); kInvalidArgument otherwise.
[[nodiscard]] absl::StatusOr<Accel> ParseAccel(absl::string_view text);

// Guest memory backed by a file the caller holds open (a memfd), instead of anonymous memory.
// shared: the guest's writes go to the file (a template being made: its memory ends up there).
// Not shared: the file is mapped copy-on-write (a clone restored from a template: clones share
// its clean pages, their own writes stay private). The file must be at least the VM's memory
// size and must not change while a clone maps it.
struct MemoryFile {
  int fd = -1;
  bool shared = false;
};

// The largest disk a VM may be given (1 TiB); qcow2 allocates only what the guest writes.
inline constexpr int64_t kMaxDiskMib = int64_t{1} << 20;

// Everything needed to boot one microVM. Paths must be absolute.
struct VmSpec {
  // [A-Za-z0-9_.-], 1..64 characters; appears in process names and logs.
  std::string id;
  // Private per-VM directory (created 0700 if missing, must be empty). Holds the disk overlay,
  // sockets, console log and state; removed when the VM is stopped.
  std::string run_dir;
  std::string kernel;  // uncompressed kernel (ELF with PVH note)
  std::string initrd;
  std::string rootfs;  // golden raw ext4 image; never written (the VM writes to an overlay)
  int cpus = 1;
  int memory_mib = 512;
  // The disk the guest sees, in MiB: its overlay's size. 0 or less than the rootfs (or the top
  // disk layer): their size. The guest grows its file system to it at boot.
  int64_t disk_mib = 0;
  // Appended to the driver's kernel command line.
  std::string kernel_cmdline_extra;
  Accel accel = Accel::kAuto;
  // true: the VM dies with the process that called StartVm, even if it is SIGKILLed, and its
  // run_dir is removed. false: the VM outlives the caller (a daemon) and can be re-attached
  // with Vmm::Attach(run_dir) after the caller restarts.
  bool tie_to_caller = true;
  // Upper bound on the serial console log kept in run_dir (all rotated files together).
  uint64_t console_log_limit_bytes = 1 << 20;
  // Unset: anonymous memory.
  std::optional<MemoryFile> memory_file;
  // Frozen disks between `rootfs` and the VM's own overlay, lowest first (a template's or a
  // checkpoint's disk as it was when its memory was saved). Never written; they must stay in
  // place while the VM runs.
  std::vector<std::string> disk_layers;
  // >= 0: restore instead of booting. The VM starts waiting for state, StartVm feeds it the
  // state saved by Vm::SaveState from this descriptor (read from its current offset; the caller
  // keeps ownership) and resumes it. The spec (memory size, cpus, kernel, initrd, disks) must be
  // the one the state was saved with.
  int restore_state_fd = -1;
  // The saved state left out a shared memory file's contents (SaveState's skip_shared_memory):
  // memory_file must be that file.
  bool restore_skips_shared_memory = false;
  // How long a restore may take to load the state.
  std::chrono::milliseconds restore_timeout{60000};
};

// A running (or finished) microVM. Owned by one caller; not thread-safe. Destroying a Vm that
// was neither stopped nor detached kills the VM and removes its run_dir.
class Vm {
 public:
  Vm() = default;
  Vm(const Vm&) = delete;
  Vm& operator=(const Vm&) = delete;
  virtual ~Vm() = default;

  [[nodiscard]] virtual const std::string& id() const = 0;
  // The VMM process (e.g. QEMU); for diagnostics and tests.
  [[nodiscard]] virtual pid_t pid() const = 0;
  [[nodiscard]] virtual const std::string& run_dir() const = 0;
  // Unix socket the host connects to for the guest agent channel (a byte stream).
  [[nodiscard]] virtual std::string agent_socket_path() const = 0;
  // The newest part of the serial console log (older output rotates to `<path>.1`).
  [[nodiscard]] virtual std::string console_log_path() const = 0;
  // The accelerator actually in use (never kAuto).
  [[nodiscard]] virtual Accel accel() const = 0;
  // A one-line warning for the user when the driver fell back (e.g. to TCG); empty otherwise.
  [[nodiscard]] virtual const std::string& accel_note() const = 0;

  // True until the VMM process has exited.
  [[nodiscard]] virtual bool IsRunning() = 0;
  // Waits up to `timeout` for the VM to exit by itself; kDeadlineExceeded if it is still up.
  virtual absl::Status WaitExit(std::chrono::milliseconds timeout) = 0;
  // Why the VM ended ("guest powered off", "killed by signal 9", ...); empty while running.
  [[nodiscard]] virtual std::string exit_reason() = 0;

  // Stops the VM in order: wait up to `grace` for it to exit by itself (ask the guest first,
  // through the agent), then ask the VMM to quit, then kill. Reaps every process and removes
  // run_dir. Idempotent.
  virtual absl::Status Stop(std::chrono::milliseconds grace) = 0;
  // Kills the VM at once, reaps, removes run_dir. Idempotent.
  virtual absl::Status Kill() = 0;
  // Pauses the guest (its vCPUs stop, its disks are flushed). Idempotent.
  virtual absl::Status Pause() = 0;
  // Lets a paused guest run again. Idempotent.
  virtual absl::Status Resume() = 0;
  // Writes the state of a paused VM (devices and memory) to `fd`, a writable regular file the
  // caller owns; the VM stays paused. skip_shared_memory leaves out memory that lives in a
  // shared MemoryFile (the file holds it). Fails (the VM is unharmed and stays paused) when the
  // VM is not paused, the file cannot be written (e.g. a full disk) or `timeout` passes.
  virtual absl::Status SaveState(int fd, bool skip_shared_memory,
                                 std::chrono::milliseconds timeout) = 0;
  // The VM's own writable disk in run_dir (what the guest wrote on top of its rootfs and disk
  // layers). Copy it while the VM is paused to keep it with a saved state.
  [[nodiscard]] virtual std::string disk_path() const = 0;

  // Leaves the VM running when this object is destroyed (tie_to_caller=false VMs only);
  // re-attach with Vmm::Attach(run_dir). kFailedPrecondition for a tied VM.
  virtual absl::Status Detach() = 0;
};

// A VM driver. Implementations document their own thread safety.
class Vmm {
 public:
  Vmm() = default;
  Vmm(const Vmm&) = delete;
  Vmm& operator=(const Vmm&) = delete;
  virtual ~Vmm() = default;

  [[nodiscard]] virtual const char* name() const = 0;
  // Whether this driver can save and restore VMs (Vm::SaveState, VmSpec::restore_state_fd,
  // VmSpec::memory_file).
  [[nodiscard]] virtual bool CanSaveState() const { return false; }
  // What a state saved from a VM started with `spec` depends on (the VMM binary, the machine it
  // emulates and its devices, the accelerator, the kernel, initrd and disks), as text: a state
  // restores only into a VM whose fingerprint is equal. Ids, run dirs and descriptors do not
  // count. kUnimplemented when the driver cannot save state.
  [[nodiscard]] virtual absl::StatusOr<std::string> StateFingerprint(const VmSpec& spec) {
    (void)spec;
    return absl::UnimplementedError(absl::StrCat(name(), " cannot save VM state"));
  }
  // Boots a VM and returns once it is ready for the host to connect (its control channel
  // answers). The guest may still be booting.
  virtual absl::StatusOr<std::unique_ptr<Vm>> StartVm(const VmSpec& spec) = 0;
  // The frozen disk layers (VmSpec::disk_layers) of the VM whose run dir is `run_dir`; empty
  // when it has none or there is no such VM. Files those layers are in must stay.
  [[nodiscard]] virtual std::vector<std::string> DiskLayers(const std::string& run_dir) {
    (void)run_dir;
    return {};
  }
  // Takes ownership of a VM started earlier with tie_to_caller=false, by its run_dir. Returns a
  // Vm whose IsRunning() is false if it has exited meanwhile (Stop() then cleans up).
  virtual absl::StatusOr<std::unique_ptr<Vm>> Attach(const std::string& run_dir) = 0;
};

}  // namespace abox::vmm
