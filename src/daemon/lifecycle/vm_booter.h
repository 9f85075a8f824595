// "Boot a VM", apart from "make it sandbox X": a VM of some size from some image files, with
// its agent connected, whose failure and tunnel callbacks go through VmHooks, which a sandbox
// routes to itself when it takes the VM. A warm pool boots VMs here before anyone asked; a
// snapshot restore replaces this step.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/host_layout.h"
#include "src/daemon/lifecycle/checkpoints.h"
#include "src/daemon/lifecycle/golden_templates.h"
#include "src/image/image_store.h"
#include "src/net/tunnel.h"
#include "src/runtime/sandbox.h"
#include "src/vmm/vmm.h"

namespace abox::daemon {

// Where a VM's agent reports. Thread-safe; called on the agent's I/O thread (must not block).
class VmHooks final {
 public:
  using FailureFn = std::function<void(const absl::Status&)>;
  using TunnelFn = std::function<void(std::unique_ptr<net::TunnelStream>)>;

  // Until Route(): a failure is kept and delivered by Route(); a tunnel is dropped (reset).
  void OnFailure(const absl::Status& status);
  void OnTunnel(std::unique_ptr<net::TunnelStream> tunnel);
  void Route(FailureFn on_failure, TunnelFn on_tunnel);

 private:
  std::mutex mu_;
  FailureFn on_failure_;
  TunnelFn on_tunnel_;
  std::optional<absl::Status> early_failure_;
};

struct BootRequest {
  std::string vm_id;  // names the run dir and the VM
  image::ImageFiles files;
  int cpus = 1;
  int memory_mib = 512;
  int64_t disk_mib = 0;  // see vmm::VmSpec::disk_mib; a checkpoint restore uses the checkpoint's
  vmm::Accel accel = vmm::Accel::kAuto;
  absl::Duration boot_timeout = absl::Seconds(90);
  // Set: restore a clone of the golden template for this image and shape (made first when
  // there is none); a failed restore falls back to a boot, with a note.
  GoldenTemplates* templates = nullptr;
  // Set: restore this checkpoint (a fork, or the sandbox's own restore); no fallback.
  const CheckpointInfo* checkpoint = nullptr;
};

struct BootedVm {
  std::unique_ptr<runtime::Sandbox> vm;
  std::shared_ptr<VmHooks> hooks;
  // The VM was restored from a golden template (else it booted).
  bool restored = false;
  // Why a restore was not possible and the VM booted instead (for the user); empty otherwise.
  std::string fallback_note;
};

// Boots (or restores, see BootRequest::templates) a VM whose agent reports through `hooks`
// (made here when null). The VM outlives aboxd (not tied to the caller): a restarted aboxd
// re-attaches. A restored VM has the template's identity until runtime::ApplyGuestIdentity.
[[nodiscard]] absl::StatusOr<BootedVm> BootVm(vmm::Vmm& vmm, const base::HostLayout& layout,
                                              const BootRequest& request,
                                              std::shared_ptr<VmHooks> hooks = nullptr);

}  // namespace abox::daemon
