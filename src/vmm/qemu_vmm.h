// The QEMU driver: microVMs with `qemu-system-x86_64 -M microvm`, each supervised by abox-shim.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "src/vmm/kvm_probe.h"
#include "src/vmm/vmm.h"

namespace abox::vmm {

struct QemuVmmOptions {
  std::string qemu_binary = "qemu-system-x86_64";
  std::string qemu_img_binary = "qemu-img";
  // The abox-shim executable. Empty: $ABOX_SHIM, else beside the running executable, else
  // <exe dir>/../lib/abox/ (base::FindCompanionBinary).
  std::string shim_path;
  // abox-jail (jail.h), found the same way ($ABOX_JAIL_BINARY).
  std::string jail_path;
  // false: QEMU runs without its jail's namespaces, new root and per-VM uid (decision 0021);
  // only for measuring what the jail costs. Create() sets it false when $ABOX_JAIL is "off".
  bool jail = true;
  // The CLONE_NEW* flags QEMU is cloned into; unset: JailNamespaces(running as root). Tests set
  // flags the kernel refuses to stand in for a host that refuses namespaces.
  std::optional<uint64_t> jail_namespaces;
  // Where the KVM probe verdict is cached (e.g. $ABOX_HOME/cache/kvm-probe.json); empty: none.
  std::string kvm_probe_cache;
  // How long StartVm waits for QEMU's QMP socket to answer.
  std::chrono::milliseconds ready_timeout{10000};
  std::chrono::milliseconds kvm_probe_deadline{8000};
  // Size bound for QEMU's own stderr log in the run_dir.
  uint64_t qemu_log_limit = 1 << 20;
};

// Starts and re-attaches QEMU microVMs (see vmm.h for the contract). Each VM gets its own
// run_dir with a qcow2 overlay over the read-only golden image, a QMP socket and an agent
// socket, and its own abox-shim process (shim.h) that owns QEMU. QEMU is hardened (seccomp
// sandbox, no NIC, no host share, descriptors instead of paths) and runs in a jail of its own
// (jail.h: namespaces, a minimal root, a per-VM uid when abox runs as root).
//
// Thread-safe: StartVm/Attach may run concurrently (the accelerator decision is made once per
// guest kernel, under a lock). The returned Vm objects are not thread-safe.
class QemuVmm final : public Vmm {
 public:
  // Fails with a clear message (naming the Debian packages to install) when QEMU, qemu-img or
  // abox-shim cannot be found.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<QemuVmm>> Create(QemuVmmOptions options = {});

  [[nodiscard]] const char* name() const override { return "qemu"; }
  [[nodiscard]] bool CanSaveState() const override { return true; }
  absl::StatusOr<std::string> StateFingerprint(const VmSpec& spec) override;
  std::vector<std::string> DiskLayers(const std::string& run_dir) override;
  absl::StatusOr<std::unique_ptr<Vm>> StartVm(const VmSpec& spec) override;
  absl::StatusOr<std::unique_ptr<Vm>> Attach(const std::string& run_dir) override;

  // The accelerator StartVm would use for `spec` (probes KVM on first use; see kvm_probe.h).
  [[nodiscard]] absl::StatusOr<AccelDecision> ResolveAccelFor(const VmSpec& spec);

 private:
  explicit QemuVmm(QemuVmmOptions options) : options_(std::move(options)) {}
  std::optional<uint64_t> TscKhz();

  QemuVmmOptions options_;  // binaries resolved to absolute paths by Create()
  std::mutex mu_;
  std::map<std::string, AccelDecision> accel_by_kernel_;  // guarded by mu_
  std::optional<std::optional<uint64_t>> tsc_khz_;        // guarded by mu_
};

// Checks a spec before anything is created: id charset, absolute paths, readable files,
// sane sizes. The errors say what to fix.
[[nodiscard]] absl::Status ValidateVmSpec(const VmSpec& spec);
// The size of a VM's disk overlay in bytes: spec.disk_mib, or the rootfs's size when that is 0
// or equal. kInvalidArgument (saying the least size) when the disk would be smaller than the
// rootfs: the guest's file system would reach past the end of its disk.
[[nodiscard]] absl::StatusOr<int64_t> OverlayBytes(const VmSpec& spec, int64_t rootfs_bytes);

}  // namespace abox::vmm
