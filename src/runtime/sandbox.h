#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/runtime/agent_client.h"
#include "src/vmm/vmm.h"

namespace abox::runtime {

struct SandboxConfig {
  std::string image = "default";
  int cpus = 1;
  int memory_mib = 512;
  vmm::Accel accel = vmm::Accel::kAuto;
  // true for one-shot use (`abox run`): the VM dies with this process, even on SIGKILL.
  bool tie_to_caller = true;
  // How long the guest may take from VMM start to the agent's hello.
  absl::Duration boot_timeout = absl::Seconds(90);
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
  static absl::StatusOr<std::unique_ptr<Sandbox>> Boot(vmm::Vmm& vmm,
                                                       const SandboxConfig& config,
                                                       const NoticeFn& notice);
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  ~Sandbox();

  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] AgentClient& agent() { return *agent_; }
  [[nodiscard]] vmm::Vm& vm() { return *vm_; }

  // Orderly teardown: agent shutdown, wait, VMM quit, kill; every process reaped and every
  // file of the VM removed.
  absl::Status Destroy();

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
absl::StatusOr<std::unique_ptr<vmm::Vmm>> CreateDefaultVmm();

// A fresh random sandbox id (12 lowercase hex characters).
std::string NewSandboxId();

}  // namespace abox::runtime
