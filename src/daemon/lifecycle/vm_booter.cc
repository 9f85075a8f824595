#include "src/daemon/lifecycle/vm_booter.h"

#include <fcntl.h>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"

namespace abox::daemon {

void VmHooks::OnFailure(const absl::Status& status) {
  FailureFn fn;
  {
    std::lock_guard lock(mu_);
    if (!on_failure_) {
      early_failure_ = status;
      return;
    }
    fn = on_failure_;
  }
  fn(status);
}

void VmHooks::OnTunnel(std::unique_ptr<net::TunnelStream> tunnel) {
  TunnelFn fn;
  {
    std::lock_guard lock(mu_);
    fn = on_tunnel_;
  }
  if (fn) {
    fn(std::move(tunnel));
  }
  // Else `tunnel` goes out of scope here: the guest sees its connection reset.
}

void VmHooks::Route(FailureFn on_failure, TunnelFn on_tunnel) {
  std::optional<absl::Status> early;
  {
    std::lock_guard lock(mu_);
    on_failure_ = std::move(on_failure);
    on_tunnel_ = std::move(on_tunnel);
    early.swap(early_failure_);
  }
  if (early && on_failure) {
    on_failure(*early);
  }
}

namespace {

runtime::SandboxConfig ConfigFor(const base::HostLayout& layout, const BootRequest& request,
                                 const std::shared_ptr<VmHooks>& hooks) {
  runtime::SandboxConfig config;
  config.id = request.vm_id;
  config.cpus = request.cpus;
  config.memory_mib = request.memory_mib;
  config.disk_mib = request.disk_mib;
  config.accel = request.accel;
  config.tie_to_caller = false;
  config.boot_timeout = request.boot_timeout;
  config.files = request.files;
  config.layout = layout;
  config.on_failure = [hooks](const absl::Status& status) { hooks->OnFailure(status); };
  config.on_tunnel = [hooks](std::unique_ptr<net::TunnelStream> tunnel) {
    hooks->OnTunnel(std::move(tunnel));
  };
  return config;
}

// Restores a clone of the golden template; what went wrong otherwise.
absl::StatusOr<std::unique_ptr<runtime::Sandbox>> Restore(vmm::Vmm& vmm,
                                                          const base::HostLayout& layout,
                                                          const BootRequest& request,
                                                          const std::shared_ptr<VmHooks>& hooks) {
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<const GoldenTemplate> tpl,
                        request.templates->Get({.files = request.files,
                                                .cpus = request.cpus,
                                                .memory_mib = request.memory_mib,
                                                .disk_mib = request.disk_mib,
                                                .accel = request.accel,
                                                .boot_timeout = request.boot_timeout}));
  base::UniqueFd state(::open(tpl->state.c_str(), O_RDONLY | O_CLOEXEC));
  if (!state) {
    request.templates->Invalidate(tpl);
    return base::ErrnoError(absl::StrCat("open(", tpl->state.string(), ")"));
  }
  runtime::SandboxConfig config = ConfigFor(layout, request, hooks);
  config.memory_file = vmm::MemoryFile{.fd = tpl->memory.get(), .shared = false};
  config.disk_layers = {tpl->disk.string()};
  config.restore_state_fd = state.get();
  config.restore_skips_shared_memory = true;
  absl::StatusOr<std::unique_ptr<runtime::Sandbox>> vm = runtime::Sandbox::Boot(
      vmm, config, [&](const std::string& note) { spdlog::warn("{}: {}", request.vm_id, note); });
  if (!vm.ok()) {
    request.templates->Invalidate(tpl);  // the next create makes a new one
  }
  return vm;
}

}  // namespace

absl::StatusOr<BootedVm> BootVm(vmm::Vmm& vmm, const base::HostLayout& layout,
                                const BootRequest& request, std::shared_ptr<VmHooks> hooks) {
  if (hooks == nullptr) {
    hooks = std::make_shared<VmHooks>();
  }
  if (request.checkpoint != nullptr) {
    const CheckpointInfo& ck = *request.checkpoint;
    base::UniqueFd state(::open(ck.state().c_str(), O_RDONLY | O_CLOEXEC));
    if (!state) {
      return base::ErrnoError(absl::StrCat("open(", ck.state().string(), ")"));
    }
    runtime::SandboxConfig config = ConfigFor(layout, request, hooks);
    config.disk_layers = ck.layers_for_restore();
    config.disk_mib = ck.disk_mib;
    config.restore_state_fd = state.get();
    absl::StatusOr<std::unique_ptr<runtime::Sandbox>> vm = runtime::Sandbox::Boot(
        vmm, config, [&](const std::string& note) { spdlog::warn("{}: {}", request.vm_id, note); });
    if (!vm.ok()) {
      return absl::Status(vm.status().code(), absl::StrCat("restoring checkpoint ", ck.name,
                                                           " failed: ", vm.status().message()));
    }
    return BootedVm{.vm = *std::move(vm), .hooks = std::move(hooks), .restored = true};
  }
  std::string note;
  if (request.templates != nullptr && vmm.CanSaveState()) {
    // The attempt reports to hooks of its own: a failed restore's agent failure must not reach
    // the sandbox, which then boots. A failure of a restored VM before this routing is kept and
    // delivered by Route.
    auto attempt = std::make_shared<VmHooks>();
    absl::StatusOr<std::unique_ptr<runtime::Sandbox>> restored =
        Restore(vmm, layout, request, attempt);
    if (restored.ok()) {
      attempt->Route(
          [hooks](const absl::Status& s) { hooks->OnFailure(s); },
          [hooks](std::unique_ptr<net::TunnelStream> t) { hooks->OnTunnel(std::move(t)); });
      return BootedVm{.vm = *std::move(restored), .hooks = std::move(hooks), .restored = true};
    }
    note = absl::StrCat("restoring from the golden snapshot failed (", restored.status().message(),
                        "); booted instead");
    spdlog::warn("{}: {}", request.vm_id, note);
  }
  runtime::SandboxConfig config = ConfigFor(layout, request, hooks);
  const std::string id = request.vm_id;
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Sandbox> vm,
                        runtime::Sandbox::Boot(vmm, config, [&](const std::string& note) {
                          spdlog::warn("{}: {}", id, note);
                        }));
  return BootedVm{.vm = std::move(vm), .hooks = std::move(hooks), .fallback_note = note};
}

}  // namespace abox::daemon
