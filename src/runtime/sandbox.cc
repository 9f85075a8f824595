#include "src/runtime/sandbox.h"

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/fenced_remove.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unix_socket.h"
#include "src/image/image_store.h"
#include "src/proto/frame.h"
#include "src/vmm/qemu_vmm.h"

namespace abox::runtime {
namespace {

// Console logs of failed sandboxes kept in $ABOX_HOME/logs (oldest removed first).
constexpr size_t kKeptFailureLogs = 20;

// Attach(): handshakes tried, how long each but the last may take (a running guest answers in
// milliseconds), and the pause after the first failed one (growing).
constexpr int kAttachAttempts = 3;
constexpr absl::Duration kAttachAttemptTimeout = absl::Seconds(3);
constexpr absl::Duration kAttachRetryPause = absl::Milliseconds(400);

// The first line of a console log that explains a crash, if any.
std::string CrashLine(const std::string& console) {
  for (const char* marker : {"Kernel panic", "BUG:", "Oops:", "general protection fault",
                             "Out of memory", "abox-guest: stage1:", "abox-guest: fatal"}) {
    size_t pos = console.find(marker);
    if (pos != std::string::npos) {
      size_t start = console.rfind('\n', pos);
      start = start == std::string::npos ? 0 : start + 1;
      size_t end = console.find('\n', pos);
      std::string line = console.substr(start, end == std::string::npos ? end : end - start);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
        line.pop_back();
      }
      return line;
    }
  }
  return "";
}

void PruneLogs(const std::filesystem::path& dir) {
  std::vector<std::filesystem::directory_entry> logs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    logs.push_back(e);
  }
  if (logs.size() <= kKeptFailureLogs) {
    return;
  }
  std::sort(logs.begin(), logs.end(), [](const auto& a, const auto& b) {
    std::error_code e1, e2;
    return a.last_write_time(e1) < b.last_write_time(e2);
  });
  // Deletes are fenced to $ABOX_HOME (the logs dir's parent). One that fails leaves an old log
  // behind for the next prune to retry.
  const std::filesystem::path logs_dir = dir.lexically_normal();
  for (size_t i = 0; i + kKeptFailureLogs < logs.size(); ++i) {
    (void)base::RemoveFileUnder(logs_dir.parent_path(), logs_dir / logs[i].path().filename());
  }
}

}  // namespace

std::string NewSandboxId() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string id;
  for (int i = 0; i < 12; ++i) {
    id += "0123456789abcdef"[hex(rd)];
  }
  return id;
}

absl::StatusOr<std::unique_ptr<vmm::Vmm>> CreateDefaultVmm() {
  ABOX_ASSIGN_OR_RETURN(base::HostLayout paths, base::ResolveHostLayout());
  return CreateDefaultVmm(paths);
}

absl::StatusOr<std::unique_ptr<vmm::Vmm>> CreateDefaultVmm(const base::HostLayout& paths) {
  vmm::QemuVmmOptions options;
  options.kvm_probe_cache = (paths.home / "cache" / "kvm-probe.json").string();
  std::error_code ec;
  std::filesystem::create_directories(paths.home / "cache", ec);
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<vmm::QemuVmm> qemu, vmm::QemuVmm::Create(options));
  return std::unique_ptr<vmm::Vmm>(std::move(qemu));
}

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Boot(vmm::Vmm& vmm, const SandboxConfig& config,
                                                       const NoticeFn& notice) {
  base::HostLayout paths;
  if (config.layout) {
    paths = *config.layout;
  } else {
    ABOX_ASSIGN_OR_RETURN(paths, base::ResolveHostLayout());
  }
  image::ImageFiles files;
  if (config.files) {
    files = *config.files;
  } else {
    ABOX_ASSIGN_OR_RETURN(files,
                          image::OpenImageForBoot(paths, config.image, proto::kProtocolVersion));
  }
  std::unique_ptr<Sandbox> sb(new Sandbox());
  sb->id_ = config.id.empty() ? NewSandboxId() : config.id;
  sb->logs_dir_ = paths.KeptLogsDir().string();
  std::filesystem::path sandboxes = paths.SandboxesDir();
  std::error_code ec;
  std::filesystem::create_directories(sandboxes, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", sandboxes.string(), ": ",
                                                    ec.message(), "; check $ABOX_HOME"));
  }
  ::chmod(sandboxes.c_str(), 0700);

  vmm::VmSpec spec;
  spec.id = sb->id_;
  spec.run_dir = (sandboxes / sb->id_).string();
  spec.kernel = files.vmlinux.string();
  spec.initrd = files.initramfs.string();
  spec.rootfs = files.rootfs.string();
  spec.cpus = config.cpus;
  spec.memory_mib = config.memory_mib;
  spec.disk_mib = config.disk_mib;
  spec.accel = config.accel;
  spec.tie_to_caller = config.tie_to_caller;
  spec.memory_file = config.memory_file;
  spec.disk_layers = config.disk_layers;
  spec.restore_state_fd = config.restore_state_fd;
  spec.restore_skips_shared_memory = config.restore_skips_shared_memory;
  ABOX_ASSIGN_OR_RETURN(sb->vm_, vmm.StartVm(spec));
  if (!sb->vm_->accel_note().empty() && notice) {
    notice(sb->vm_->accel_note());
  }

  auto channel = base::ConnectUnixSocket(sb->vm_->agent_socket_path());
  if (!channel.ok()) {
    std::string report = sb->FailureReport();
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to the guest agent channel: ", channel.status().message(), "\n  ", report));
  }
  ABOX_ASSIGN_OR_RETURN(sb->agent_,
                        AgentClient::Create(std::move(*channel), {.on_failure = config.on_failure,
                                                                  .on_tunnel = config.on_tunnel}));
  if (auto s = sb->agent_->WaitReady(config.boot_timeout); !s.ok()) {
    sb->agent_->Fail(s);
    return absl::UnavailableError(absl::StrCat("the sandbox did not boot: ", sb->FailureReport()));
  }
  return sb;
}

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Attach(
    vmm::Vmm& vmm, const std::string& id, const std::string& run_dir, absl::Duration timeout,
    std::function<void(const absl::Status&)> on_failure,
    std::function<void(std::unique_ptr<net::TunnelStream>)> on_tunnel,
    std::optional<base::HostLayout> layout) {
  base::HostLayout paths;
  if (layout) {
    paths = *layout;
  } else {
    ABOX_ASSIGN_OR_RETURN(paths, base::ResolveHostLayout());
  }
  std::unique_ptr<Sandbox> sb(new Sandbox());
  sb->id_ = id;
  sb->logs_dir_ = paths.KeptLogsDir().string();
  ABOX_ASSIGN_OR_RETURN(sb->vm_, vmm.Attach(run_dir));
  if (!sb->vm_->IsRunning()) {
    std::string report = sb->FailureReport();
    (void)sb->Destroy();
    return absl::UnavailableError(absl::StrCat("the VM is gone: ", report));
  }
  // A guest that did not see the previous host go (it reconnected within milliseconds) may
  // still hold that session's half-sent frames, and a handshake through them fails. Closing
  // the connection makes the guest see the disconnect and start clean, so the handshake is
  // tried again after a pause the guest needs to notice it. Failures are only reported once
  // a handshake succeeded: a failed attempt is not the sandbox failing.
  auto attached = std::make_shared<std::atomic<bool>>(false);
  auto report_failure = [attached, on_failure = std::move(on_failure)](const absl::Status& s) {
    if (attached->load() && on_failure) {
      on_failure(s);
    }
  };
  absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("no handshake tried");
  for (int attempt = 0;; ++attempt) {
    auto channel = base::ConnectUnixSocket(sb->vm_->agent_socket_path());
    if (!channel.ok()) {
      std::string report = sb->FailureReport();
      (void)sb->Destroy();
      return absl::UnavailableError(absl::StrCat(
          "cannot reconnect to the guest agent: ", channel.status().message(), "\n  ", report));
    }
    ABOX_ASSIGN_OR_RETURN(
        sb->agent_, AgentClient::Create(std::move(*channel),
                                        {.on_failure = report_failure, .on_tunnel = on_tunnel}));
    absl::Duration left = deadline - absl::Now();
    bool last_attempt = attempt + 1 >= kAttachAttempts || left <= kAttachRetryPause * 2;
    last = sb->agent_->WaitReady(last_attempt ? left : std::min(left, kAttachAttemptTimeout));
    if (last.ok()) {
      attached->store(true);
      last = sb->agent_->failure();  // a failure just before `attached` was set
      if (last.ok()) {
        return sb;
      }
    }
    if (last_attempt || !sb->vm_->IsRunning()) {
      break;
    }
    sb->agent_.reset();  // disconnects: the guest drops what it held of that session
    absl::SleepFor(kAttachRetryPause * (attempt + 1));
  }
  attached->store(false);
  sb->agent_->Fail(last);
  std::string report = sb->FailureReport();
  (void)sb->Destroy();
  return absl::UnavailableError(absl::StrCat("the guest agent did not answer again: ", report));
}

absl::Status Sandbox::Detach() {
  if (destroyed_) {
    return absl::FailedPreconditionError("the sandbox was destroyed");
  }
  ABOX_RETURN_IF_ERROR(vm_->Detach());
  destroyed_ = true;
  agent_.reset();
  vm_.reset();
  return absl::OkStatus();
}

void Sandbox::DisconnectAgent() { agent_.reset(); }

Sandbox::~Sandbox() { (void)Destroy(); }

absl::Status Sandbox::Destroy() {
  if (destroyed_) {
    return absl::OkStatus();
  }
  destroyed_ = true;
  absl::Status status;
  if (agent_ && vm_ && vm_->IsRunning() && agent_->failure().ok()) {
    agent_->Shutdown();
  }
  if (vm_) {
    // A guest whose agent failed will not power off by itself: no grace period then.
    bool healthy = agent_ && agent_->failure().ok();
    status = vm_->Stop(healthy ? std::chrono::seconds(5) : std::chrono::seconds(0));
  }
  agent_.reset();
  vm_.reset();
  return status;
}

std::string Sandbox::FailureReport() {
  std::vector<std::string> parts;
  if (agent_ && !agent_->failure().ok()) {
    parts.push_back(std::string(agent_->failure().message()));
  }
  if (vm_) {
    // A closed channel usually means the VM is on its way down (panic, QEMU crash): give it a
    // moment so the exit reason and the last console lines are there to report.
    if (agent_ && agent_->failure().code() == absl::StatusCode::kUnavailable) {
      (void)vm_->WaitExit(std::chrono::seconds(2));
    }
    if (!vm_->IsRunning()) {
      parts.push_back(absl::StrCat("VM stopped: ", vm_->exit_reason()));
    }
    // Keep the console log: the run dir goes away with the VM.
    std::string console;
    for (const std::string& p : {vm_->console_log_path() + ".1", vm_->console_log_path()}) {
      auto data = base::ReadFile(p, 4 << 20);
      if (data.ok()) {
        console += *data;
      }
    }
    if (std::string crash = CrashLine(console); !crash.empty()) {
      parts.push_back(absl::StrCat("the guest reported: ", crash));
    }
    std::error_code ec;
    std::filesystem::create_directories(logs_dir_, ec);
    std::string kept = absl::StrCat(logs_dir_, "/", id_, "-console.log");
    if (!ec && base::WriteFileAtomic(kept, console, 0600).ok()) {
      parts.push_back(absl::StrCat("console log: ", kept));
      PruneLogs(logs_dir_);
    } else {
      parts.push_back(absl::StrCat("console log: ", vm_->console_log_path()));
    }
  }
  return absl::StrJoin(parts, "\n  ");
}

}  // namespace abox::runtime
