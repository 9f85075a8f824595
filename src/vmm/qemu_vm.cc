#include "src/vmm/qemu_vm.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/vmm/qemu_launch.h"
#include "src/vmm/qemu_migration.h"
#include "src/vmm/shim_protocol.h"

namespace abox::vmm {
namespace {

using std::chrono::milliseconds;

// How long each escalation step of Stop() waits for the VM to go.
constexpr milliseconds kAfterQuit(5000);
constexpr milliseconds kAfterTerm(5000);
constexpr milliseconds kAfterKill(10000);
// QMP for pause, resume and save: connecting, and one command.
constexpr milliseconds kQmpConnect(3000);
constexpr milliseconds kQmpCommand(5000);

void SendSignal(int pidfd, int sig) {
  if (pidfd >= 0) {
    ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0);
  }
}

}  // namespace

absl::StatusOr<base::UniqueFd> OpenVerifiedPidfd(pid_t pid, const std::vector<std::string>& marks) {
  if (pid <= 0) {
    return absl::NotFoundError("no pid");
  }
  base::UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!fd) {
    if (errno == ESRCH) {
      return absl::NotFoundError(absl::StrCat("pid ", pid, " is gone"));
    }
    return base::ErrnoError(absl::StrCat("pidfd_open(", pid, ")"));
  }
  // Read after pidfd_open: if the cmdline matches now, the pidfd is the process we mean.
  absl::StatusOr<std::string> cmdline =
      base::ReadFile(absl::StrCat("/proc/", pid, "/cmdline"), 1 << 20);
  if (!cmdline.ok()) {
    return absl::NotFoundError(absl::StrCat("pid ", pid, " is gone"));
  }
  for (const std::string& mark : marks) {
    if (!absl::StrContains(*cmdline, mark)) {
      return absl::NotFoundError(absl::StrCat("pid ", pid, " is another process now"));
    }
  }
  return fd;
}

std::unique_ptr<QemuVm> QemuVm::Create(Parts parts) {
  return std::unique_ptr<QemuVm>(new QemuVm(std::move(parts)));
}

absl::StatusOr<std::unique_ptr<QemuVm>> QemuVm::Attach(const std::string& run_dir) {
  absl::StatusOr<VmState> state = ReadVmState(run_dir);
  if (!state.ok()) {
    return base::Annotate(state.status(), absl::StrCat("no VM to attach in ", run_dir));
  }
  if (state->tie_to_caller) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the VM in ", run_dir, " is tied to the process that started it and cannot be attached"));
  }
  Parts parts;
  parts.id = state->id;
  parts.run_dir = run_dir;
  parts.accel = state->accel;
  parts.accel_note = state->accel_note;
  parts.tie_to_caller = false;
  parts.qemu_pid = state->qemu_pid;
  if (state->phase != VmPhase::kExited) {
    if (auto fd = OpenVerifiedPidfd(state->shim_pid, {"abox-shim", run_dir}); fd.ok()) {
      parts.shim_pidfd = *std::move(fd);
    }
    if (auto fd = OpenVerifiedPidfd(state->qemu_pid, {absl::StrCat("abox-", state->id)}); fd.ok()) {
      parts.qemu_pidfd = *std::move(fd);
    }
  }
  std::unique_ptr<QemuVm> vm(new QemuVm(std::move(parts)));
  (void)vm->IsRunning();  // a gone shim is noticed here (and a lingering QEMU killed)
  return vm;
}

QemuVm::~QemuVm() {
  if (!finished_ && !detached_) {
    if (absl::Status s = Kill(); !s.ok()) {
      spdlog::warn("cleaning up VM {}: {}", p_.id, s.ToString());
    }
  }
}

std::string QemuVm::agent_socket_path() const { return RunDirPath(p_.run_dir, kAgentSocket); }
std::string QemuVm::console_log_path() const { return RunDirPath(p_.run_dir, kConsoleLog); }
std::string QemuVm::qmp_socket_path() const { return RunDirPath(p_.run_dir, kQmpSocket); }
std::string QemuVm::disk_path() const { return RunDirPath(p_.run_dir, kOverlayFile); }

absl::Status QemuVm::Pause() {
  ABOX_ASSIGN_OR_RETURN(QmpClient qmp, ConnectQmp(kQmpConnect));
  return PauseVm(qmp, kQmpCommand);
}

absl::Status QemuVm::Resume() {
  ABOX_ASSIGN_OR_RETURN(QmpClient qmp, ConnectQmp(kQmpConnect));
  return ResumeVm(qmp, kQmpCommand);
}

absl::Status QemuVm::SaveState(int fd, bool skip_shared_memory, milliseconds timeout) {
  ABOX_ASSIGN_OR_RETURN(QmpClient qmp, ConnectQmp(kQmpConnect));
  return SaveVmState(qmp, fd, skip_shared_memory, timeout);
}

absl::StatusOr<QmpClient> QemuVm::ConnectQmp(milliseconds timeout) const {
  return QmpClient::Connect(qmp_socket_path(), timeout);
}

int QemuVm::shim_pidfd() const {
  return p_.shim_child ? p_.shim_child->pidfd() : p_.shim_pidfd.get();
}

void QemuVm::SignalShim(int sig) {
  if (p_.shim_child) {
    (void)p_.shim_child->Kill(sig);
  } else {
    SendSignal(p_.shim_pidfd.get(), sig);
  }
}

void QemuVm::OnShimExit() {
  if (shim_exited_) {
    return;
  }
  shim_exited_ = true;
  std::string shim_status;
  if (p_.shim_child) {
    if (std::optional<base::ExitStatus> st = p_.shim_child->TryWait()) {
      shim_status = st->ToString();
    }
  }
  absl::StatusOr<VmState> state = ReadVmState(p_.run_dir);
  if (state.ok() && state->phase == VmPhase::kExited) {
    exit_reason_ = state->exit_reason;
    return;
  }
  // The shim died without recording an exit (it was killed); QEMU follows it (parent-death
  // signal), and the pidfd kill covers the moment before that was armed.
  SendSignal(p_.qemu_pidfd.get(), SIGKILL);
  exit_reason_ = absl::StrCat("abox-shim died unexpectedly",
                              shim_status.empty() ? "" : absl::StrCat(" (", shim_status, ")"));
}

bool QemuVm::IsRunning() {
  if (shim_exited_ || finished_ || detached_) {
    return false;
  }
  if (shim_pidfd() < 0) {
    OnShimExit();
    return false;
  }
  pollfd p{shim_pidfd(), POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, 0);
  } while (r < 0 && errno == EINTR);
  if (r > 0) {
    OnShimExit();
    return false;
  }
  return true;
}

absl::Status QemuVm::WaitExit(milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (IsRunning()) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("VM ", p_.id, " still running after ", timeout.count(), " ms"));
    }
    pollfd p{shim_pidfd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      return base::ErrnoError("poll(pidfd)");
    }
  }
  return absl::OkStatus();
}

std::string QemuVm::exit_reason() {
  if (IsRunning()) {
    return "";
  }
  if (!stopped_by_.empty()) {
    return absl::StrCat("stopped by the host (", stopped_by_, ")");
  }
  return exit_reason_;
}

absl::Status QemuVm::Stop(milliseconds grace) {
  if (finished_ || detached_) {
    return absl::OkStatus();
  }
  if (IsRunning() && !WaitExit(grace).ok()) {
    stopped_by_ = "QMP quit";
    if (absl::StatusOr<QmpClient> qmp = ConnectQmp(milliseconds(2000)); qmp.ok()) {
      (void)qmp->Quit(milliseconds(2000));
    }
  }
  if (IsRunning() && !WaitExit(kAfterQuit).ok()) {
    stopped_by_ = "SIGTERM to abox-shim";
    SignalShim(SIGTERM);
  }
  if (IsRunning() && !WaitExit(kAfterTerm).ok()) {
    stopped_by_ = "SIGKILL";
    SignalShim(SIGKILL);
    SendSignal(p_.qemu_pidfd.get(), SIGKILL);
  }
  if (IsRunning()) {
    ABOX_RETURN_IF_ERROR(WaitExit(kAfterKill));
  }
  return Finish();
}

absl::Status QemuVm::Kill() {
  if (finished_ || detached_) {
    return absl::OkStatus();
  }
  if (IsRunning()) {
    stopped_by_ = "SIGKILL";
    SignalShim(SIGKILL);
    SendSignal(p_.qemu_pidfd.get(), SIGKILL);
    ABOX_RETURN_IF_ERROR(WaitExit(kAfterKill));
  }
  return Finish();
}

absl::Status QemuVm::Finish() {
  // QEMU is a child of the shim; once the shim is gone it has been reaped (or, orphaned by a
  // killed shim, reaped by init). Wait for it to be gone so its sockets are closed.
  if (p_.qemu_pidfd) {
    pollfd p{p_.qemu_pidfd.get(), POLLIN, 0};
    (void)::poll(&p, 1, static_cast<int>(kAfterKill.count()));
  }
  finished_ = true;
  p_.caller_pipe.reset();
  p_.qemu_pidfd.reset();
  p_.shim_pidfd.reset();
  p_.shim_child.reset();
  return RemoveRunDir(p_.run_dir);
}

absl::Status QemuVm::Detach() {
  if (p_.tie_to_caller) {
    return absl::FailedPreconditionError(
        absl::StrCat("VM ", p_.id, " is tied to this process (tie_to_caller) and cannot detach"));
  }
  detached_ = true;
  p_.qemu_pidfd.reset();
  p_.shim_pidfd.reset();
  return absl::OkStatus();
}

}  // namespace abox::vmm
