// Test-only: a Vmm whose "VMs" are threads of the test process serving the real guest agent
// (abox::guest::Agent) on each VM's agent socket, so daemon unit tests get real exec semantics
// without QEMU. Commands "in the VM" run as host processes of the test user.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/vmm/vmm.h"

namespace abox::testing {

class FakeVm;  // the Vm handles (fake_vmm.cc)

struct FakeVmmOptions {
  // Reported by every VM this FakeVmm starts (Vm::accel_note()).
  std::string accel_note;
  // How long after StartVm returns the agent starts answering. The agent socket listens from
  // the start (as QEMU's does), so a host connects at once and its hello waits out the boot.
  std::chrono::milliseconds boot_delay{0};
  // How long StartVm itself takes (QEMU starting), e.g. to overlap concurrent starts.
  std::chrono::milliseconds start_latency{0};
  // Run vmm::ValidateVmSpec as is: kernel, initrd and rootfs must exist. By default it runs
  // without the image file checks (ids, run_dir, sizes, and image paths given must be absolute).
  bool check_image_files = false;
  // The /proc/vmstat stand-in each VM's agent reads its OOM kill counter from
  // (guest::Agent::Options::oom_counter_path). Empty: none, as outside a VM (the host's counter
  // says nothing about a command). Tests point it at a file their commands rewrite.
  std::string oom_counter_path;
};

// A live fake VM as the process-wide registry sees it.
struct FakeVmInfo {
  std::string id;
  std::string run_dir;
  bool running = false;   // the agent thread is serving (or booting)
  bool attached = false;  // a Vm handle owns it (not detached)
  bool tie_to_caller = true;
  int connections = 0;  // host connections the agent has accepted so far
};

// What a FakeVmm counts: calls on it and on the Vm handles it returned (failed and repeated
// calls included; the kill a destroyed Vm does by itself is not a call).
struct FakeVmmCalls {
  int start_vm = 0;
  int attach = 0;
  int stop = 0;
  int kill = 0;
  int detach = 0;
};

// Implements the vmm.h contract: StartVm creates run_dir (0700, must be empty) with state.json,
// console.log and agent.sock in the real layout, and returns once the agent socket listens;
// Stop/Kill end the agent (its running commands are killed and reaped), remove run_dir and are
// idempotent; destroying a Vm that was neither stopped nor detached kills it; Detach (only
// tie_to_caller=false) leaves the VM serving, and Attach(run_dir) — from any FakeVmm of this
// process — takes it over. The agent serves one host connection at a time; a new connection
// after the previous one closed is the daemon reconnecting (a fresh session: the previous
// host's commands are gone). The VM ends by itself when a host sends kShutdown ("guest powered
// off"); Stop(grace) waits that long for it, then ends it ("stopped by the host (quit)").
// accel() is kKvm when the spec asks for it, else kTcg. console.log holds the fake's own lines
// (boot, connections, exit; not the agent's stderr), is not rotated, and stops growing at
// console_log_limit_bytes. pid() is the test process: never signal it, use Crash().
//
// Every FakeVmm shares one process-wide registry of live VMs, keyed by run_dir, so a VM
// outlives the FakeVmm (the "daemon") that started it. Call KillAll() at the end of each test
// that may leave VMs behind (detached, or crashed and never stopped).
//
// Thread-safe: StartVm/Attach and the knobs may be called from any thread, and the statics
// too. Each returned Vm is, per the contract, used by one owner at a time.
class FakeVmm final : public vmm::Vmm {
 public:
  explicit FakeVmm(FakeVmmOptions options = {});
  ~FakeVmm() override;

  [[nodiscard]] const char* name() const override { return "fake"; }
  absl::StatusOr<std::unique_ptr<vmm::Vm>> StartVm(const vmm::VmSpec& spec) override;
  // Besides the contract: kFailedPrecondition while another Vm handle owns the VM (it was not
  // detached), so a test notices a daemon that attaches twice.
  absl::StatusOr<std::unique_ptr<vmm::Vm>> Attach(const std::string& run_dir) override;

  // Knobs (thread-safe; they apply to later StartVm calls).
  // The next `times` StartVm calls that pass validation fail with `status` (nothing created).
  void FailStartVm(const absl::Status& status, int times = 1);
  void set_boot_delay(std::chrono::milliseconds delay);
  void set_start_latency(std::chrono::milliseconds latency);
  void set_accel_note(std::string note);

  // Calls made on this FakeVmm and its Vm handles so far.
  [[nodiscard]] FakeVmmCalls calls() const;

  // The VM dies now as if QEMU was killed: its agent ends (the host connection sees EOF, its
  // commands are killed), the agent socket stops accepting, IsRunning() turns false and
  // exit_reason() is `reason`; run_dir stays until a Vm handle's Stop/Kill. `run_dir_or_id`: a
  // run_dir (starts with '/') or a VM id. kNotFound for no such VM, kFailedPrecondition when
  // it has already exited.
  static absl::Status Crash(const std::string& run_dir_or_id,
                            const std::string& reason = "QEMU killed by signal 9 (SIGKILL)");
  // Appends `line` to the VM's console log (e.g. a kernel panic line for a failure report).
  static absl::Status AppendConsole(const std::string& run_dir_or_id, const std::string& line);
  // The VM's next host connection first receives `bytes` (e.g. the tail of a frame of the
  // previous session, which a real guest that missed the disconnect may still send).
  static absl::Status LeaveStaleBytes(const std::string& run_dir_or_id, std::string bytes);
  // The VM by run_dir or id, if the registry has it.
  [[nodiscard]] static std::optional<FakeVmInfo> Find(const std::string& run_dir_or_id);
  // Every VM in the registry (running or exited but not yet stopped), by run_dir.
  [[nodiscard]] static std::vector<FakeVmInfo> LiveVms();
  // Ends every VM in the registry and removes their run_dirs; Vm handles still held then
  // report exit_reason "killed by FakeVmm::KillAll" and Stop() succeeds. Returns the first
  // cleanup error.
  static absl::Status KillAll();

 private:
  friend class FakeVm;
  struct Knobs {
    std::deque<absl::Status> start_failures;
    std::chrono::milliseconds boot_delay{0};
    std::chrono::milliseconds start_latency{0};
    std::string accel_note;
    std::string oom_counter_path;
  };
  struct Counters;

  const bool check_image_files_;
  std::shared_ptr<Counters> counters_;  // shared with the Vm handles, which may outlive us
  mutable std::mutex mu_;
  Knobs knobs_;  // guarded by mu_
};

}  // namespace abox::testing
