#include "src/daemon/lifecycle/vm_booter.h"

#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"

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

absl::StatusOr<BootedVm> BootVm(vmm::Vmm& vmm, const base::HostLayout& layout,
                                const BootRequest& request, std::shared_ptr<VmHooks> hooks) {
  if (hooks == nullptr) {
    hooks = std::make_shared<VmHooks>();
  }
  runtime::SandboxConfig config;
  config.id = request.vm_id;
  config.cpus = request.cpus;
  config.memory_mib = request.memory_mib;
  config.accel = request.accel;
  config.tie_to_caller = false;
  config.boot_timeout = request.boot_timeout;
  config.files = request.files;
  config.layout = layout;
  config.on_failure = [hooks](const absl::Status& status) { hooks->OnFailure(status); };
  config.on_tunnel = [hooks](std::unique_ptr<net::TunnelStream> tunnel) {
    hooks->OnTunnel(std::move(tunnel));
  };
  const std::string id = request.vm_id;
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Sandbox> vm,
                        runtime::Sandbox::Boot(vmm, config, [&](const std::string& note) {
                          spdlog::warn("{}: {}", id, note);
                        }));
  return BootedVm{std::move(vm), std::move(hooks)};
}

}  // namespace abox::daemon
