// One QEMU microVM as seen by its owner: the handle QemuVmm returns.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/child_process.h"
#include "src/base/unique_fd.h"
#include "src/vmm/qmp_client.h"
#include "src/vmm/vmm.h"

namespace abox::vmm {

// Owns a VM through its abox-shim: the shim process (as a child, or by pidfd when detached or
// re-attached), a pidfd on QEMU for the last-resort kill, and, for tie_to_caller VMs, the write
// end of the pipe whose closing tells the shim to tear the VM down. Reads state.json, which
// only the shim writes. Not thread-safe.
class QemuVm final : public Vm {
 public:
  struct Parts {
    std::string id;
    std::string run_dir;
    Accel accel = Accel::kTcg;
    std::string accel_note;
    bool tie_to_caller = true;
    pid_t qemu_pid = 0;
    // Exactly one of shim_child / shim_pidfd is set.
    std::optional<base::ChildProcess> shim_child;
    base::UniqueFd shim_pidfd;
    base::UniqueFd qemu_pidfd;   // may be invalid (QEMU already gone)
    base::UniqueFd caller_pipe;  // tie_to_caller only
  };

  [[nodiscard]] static std::unique_ptr<QemuVm> Create(Parts parts);
  // Re-attaches to a tie_to_caller=false VM from its run_dir/state.json.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<QemuVm>> Attach(const std::string& run_dir);

  ~QemuVm() override;

  [[nodiscard]] const std::string& id() const override { return p_.id; }
  [[nodiscard]] pid_t pid() const override { return p_.qemu_pid; }
  [[nodiscard]] const std::string& run_dir() const override { return p_.run_dir; }
  [[nodiscard]] std::string agent_socket_path() const override;
  [[nodiscard]] std::string console_log_path() const override;
  [[nodiscard]] Accel accel() const override { return p_.accel; }
  [[nodiscard]] const std::string& accel_note() const override { return p_.accel_note; }
  [[nodiscard]] bool IsRunning() override;
  absl::Status WaitExit(std::chrono::milliseconds timeout) override;
  [[nodiscard]] std::string exit_reason() override;
  absl::Status Stop(std::chrono::milliseconds grace) override;
  absl::Status Kill() override;
  absl::Status Detach() override;
  absl::Status Pause() override;
  absl::Status Resume() override;
  absl::Status SaveState(int fd, bool skip_shared_memory,
                         std::chrono::milliseconds timeout) override;
  [[nodiscard]] std::string disk_path() const override;

  // QEMU-specific: the QMP socket (one client at a time) and a connection to it.
  [[nodiscard]] std::string qmp_socket_path() const;
  [[nodiscard]] absl::StatusOr<QmpClient> ConnectQmp(std::chrono::milliseconds timeout) const;

 private:
  explicit QemuVm(Parts parts) : p_(std::move(parts)) {}
  [[nodiscard]] int shim_pidfd() const;
  // Called once the shim has exited: reaps it and reads the final state.
  void OnShimExit();
  void SignalShim(int sig);
  // Removes the run_dir and releases everything; the VM must be gone.
  absl::Status Finish();

  Parts p_;
  bool shim_exited_ = false;
  bool finished_ = false;
  bool detached_ = false;
  std::string exit_reason_;
  std::string stopped_by_;  // set when Stop/Kill ended the VM
};

// A pidfd for `pid`, but only if /proc/<pid>/cmdline contains every string in `marks` (guards
// against a recycled pid). kNotFound when the process is gone or is not the expected one.
[[nodiscard]] absl::StatusOr<base::UniqueFd> OpenVerifiedPidfd(
    pid_t pid, const std::vector<std::string>& marks);

}  // namespace abox::vmm
