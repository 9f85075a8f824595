#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/host_layout.h"
#include "src/image/image_store.h"
#include "src/runtime/agent_client.h"
#include "src/vmm/vmm.h"

namespace abox::runtime {

struct SandboxConfig {
  std::string image = "default";
  int cpus = 1;
  int memory_mib = 512;
  int64_t disk_mib = 0;  // see vmm::VmSpec::disk_mib
  vmm::Accel accel = vmm::Accel::kAuto;
  // true for one-shot use (`abox run`): the VM dies with this process, even on SIGKILL.
  bool tie_to_caller = true;
  // How long the guest may take from VMM start to the agent's hello.
  absl::Duration boot_timeout = absl::Seconds(90);
  // The sandbox id (12 lowercase hex characters, see NewSandboxId); empty: a fresh one.
  std::string id;
  // Boot these files instead of opening `image` from $ABOX_HOME (a caller that already opened
  // and checked them, or tests with a fake VMM).
  std::optional<image::ImageFiles> files;
  // Called once, on the agent's I/O thread, when the agent connection fails after the
  // handshake (the VM died, the guest broke the protocol). Must not block.
  std::function<void(const absl::Status&)> on_failure;
  // Called on the agent's I/O thread for each tunnel the guest opens (an outgoing connection or
  // DNS stream): hand it to the sandbox's egress proxy. Must not block. Unset: every tunnel is
  // reset (no egress).
  std::function<void(std::unique_ptr<net::TunnelStream>)> on_tunnel;
  // Where the VM's run dir and kept logs go; unset: resolved from the environment (aboxd
  // resolves its layout once and passes it).
  std::optional<base::HostLayout> layout;
  // Passed to the VMM as they are (see vmm::VmSpec): file-backed memory, frozen disk layers,
  // and a saved state to restore instead of booting (a golden template or a checkpoint).
  std::optional<vmm::MemoryFile> memory_file;
  std::vector<std::string> disk_layers;
  int restore_state_fd = -1;
  bool restore_skips_shared_memory = false;
};

// Status and messages for a person (one line each); the caller decides where they go.
using NoticeFn = std::function<void(const std::string&)>;

// One microVM with a connected guest agent: image checked, VM booted through a Vmm, agent
// handshake done. Thread-safe for agent use; Destroy() once. Destroying a Sandbox tears the
// VM down. When the VM dies or the agent misbehaves, running execs fail and FailureReport()
// explains why, naming the kept console log.
class Sandbox final {
 public:
  // Boots a sandbox. `vmm` must outlive it. Errors say what to run next.
  static absl::StatusOr<std::unique_ptr<Sandbox>> Boot(vmm::Vmm& vmm, const SandboxConfig& config,
                                                       const NoticeFn& notice);
  // Takes over a sandbox booted earlier with tie_to_caller=false (by a daemon that restarted):
  // attaches to its VM by run dir and reconnects to the guest agent, which then ends the
  // commands the previous host had started. A VM that died meanwhile is cleaned up (run dir
  // removed) and reported as kUnavailable with the reason.
  // `on_tunnel` as in SandboxConfig.
  static absl::StatusOr<std::unique_ptr<Sandbox>> Attach(
      vmm::Vmm& vmm, const std::string& id, const std::string& run_dir, absl::Duration timeout,
      std::function<void(const absl::Status&)> on_failure = nullptr,
      std::function<void(std::unique_ptr<net::TunnelStream>)> on_tunnel = nullptr,
      std::optional<base::HostLayout> layout = std::nullopt);
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  ~Sandbox();

  [[nodiscard]] const std::string& id() const { return id_; }
  // Not after DisconnectAgent().
  [[nodiscard]] AgentClient& agent() { return *agent_; }
  [[nodiscard]] vmm::Vm& vm() { return *vm_; }

  // Orderly teardown: agent shutdown, wait, VMM quit, kill; every process reaped and every
  // file of the VM removed.
  absl::Status Destroy();

  // Closes the agent connection and leaves the VM running (the guest agent waits for the next
  // host): a template is saved with no host connected.
  void DisconnectAgent();

  // Leaves the VM running when this object goes away (tie_to_caller=false only), so that a
  // restarted daemon can Attach() to it. The agent connection is closed.
  absl::Status Detach();

  // After a failure: why the sandbox failed (VM exit reason, kernel panic line if any) and
  // where the console log was kept. Copies the console log out of the run dir (which Destroy
  // removes) into $ABOX_HOME/logs/.
  std::string FailureReport();

 private:
  Sandbox() = default;

  std::string id_;
  std::string logs_dir_;
  std::unique_ptr<vmm::Vm> vm_;
  std::unique_ptr<AgentClient> agent_;
  bool destroyed_ = false;
};

// The QEMU driver with this user's settings: the KVM probe verdict cached in
// $ABOX_HOME/cache/kvm-probe.json, so only the first VM on a host kernel pays for the probe.
absl::StatusOr<std::unique_ptr<vmm::Vmm>> CreateDefaultVmm(const base::HostLayout& layout);
// The same with the layout resolved from the environment.
absl::StatusOr<std::unique_ptr<vmm::Vmm>> CreateDefaultVmm();

// A fresh random sandbox id (12 lowercase hex characters).
std::string NewSandboxId();

}  // namespace abox::runtime
