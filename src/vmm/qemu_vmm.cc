#include "src/vmm/qemu_vmm.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/base/self_path.h"
#include "src/base/status_macros.h"
#include "src/base/version.h"
#include "src/vmm/bounded_log.h"
#include "src/vmm/host_tsc.h"
#include "src/vmm/jail.h"
#include "src/vmm/qemu_argv.h"
#include "src/vmm/qemu_launch.h"
#include "src/vmm/qemu_migration.h"
#include "src/vmm/qemu_vm.h"
#include "src/vmm/shim_protocol.h"

namespace abox::vmm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kInstallQemu[] = "install it with `apt-get install qemu-system-x86 qemu-utils`";
// Extra time the caller gives the shim beyond QEMU's own readiness deadline.
constexpr milliseconds kShimReportMargin(5000);
constexpr size_t kMaxReadyLine = 64 << 10;

absl::StatusOr<std::string> FindBinary(const std::string& name, const char* hint) {
  std::optional<std::string> path = base::FindExecutable(name);
  if (!path) {
    return absl::NotFoundError(absl::StrCat(name, " not found in PATH; ", hint));
  }
  return std::filesystem::absolute(*path).string();
}

absl::StatusOr<std::string> FindShim(const std::string& configured) {
  if (configured.empty()) {
    return base::FindCompanionBinary("abox-shim", "ABOX_SHIM");
  }
  if (::access(configured.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("abox-shim not found at ", configured, "; set $ABOX_SHIM to its path"));
  }
  return configured;
}

absl::Status CheckReadable(const std::string& path, const char* what) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(what, " path must be absolute: \"", path, "\""));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return base::ErrnoError(
        absl::StrCat(what, " ", path, " is missing (build or fetch the image)"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a regular file"));
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return base::ErrnoError(absl::StrCat(what, " ", path, " is not readable"));
  }
  return absl::OkStatus();
}

// Reads one line (the shim's readiness message) before `deadline`. EOF first: kUnavailable.
absl::StatusOr<std::string> ReadReadyLine(int fd, Clock::time_point deadline) {
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(fd));
  std::string line;
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return absl::DeadlineExceededError("abox-shim did not report in time");
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) {
      return base::ErrnoError("poll(ready pipe)");
    }
    char buf[4096];
    absl::StatusOr<size_t> n = base::ReadSome(fd, buf, sizeof(buf));
    if (!n.ok() && absl::IsUnavailable(n.status())) {
      continue;
    }
    ABOX_RETURN_IF_ERROR(n.status());
    if (*n == 0) {
      return absl::UnavailableError("abox-shim exited without reporting");
    }
    line.append(buf, *n);
    if (size_t nl = line.find('\n'); nl != std::string::npos) {
      return line.substr(0, nl);
    }
    if (line.size() > kMaxReadyLine) {
      return absl::InternalError("abox-shim sent an oversized readiness message");
    }
  }
}

PrivilegePlan PlanForHost(Accel accel) {
  PrivilegeInputs in;
  in.euid = ::geteuid();
  in.accel = accel;
  struct stat st {};
  if (::stat("/dev/kvm", &st) == 0) {
    in.kvm_mode = st.st_mode;
    in.kvm_gid = st.st_gid;
  }
  return PlanPrivileges(in);
}

}  // namespace

absl::StatusOr<int64_t> OverlayBytes(const VmSpec& spec, int64_t rootfs_bytes) {
  const int64_t wanted = spec.disk_mib << 20;
  if (spec.disk_mib == 0 || wanted == rootfs_bytes) {
    return rootfs_bytes;
  }
  if (wanted < rootfs_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a disk of ", spec.disk_mib, " MiB is smaller than the image's file system (",
                     (rootfs_bytes + (1 << 20) - 1) >> 20, " MiB): ask for at least that much"));
  }
  return wanted;
}

absl::Status ValidateVmSpec(const VmSpec& spec) {
  bool id_ok = !spec.id.empty() && spec.id.size() <= 64;
  for (char c : spec.id) {
    id_ok = id_ok && (absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.');
  }
  if (!id_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VM id \"", spec.id, "\" must be 1-64 characters of letters, digits, '_', '-', '.'"));
  }
  if (spec.run_dir.empty() || spec.run_dir[0] != '/' || spec.run_dir == "/") {
    return absl::InvalidArgumentError(
        absl::StrCat("run_dir must be an absolute path: \"", spec.run_dir, "\""));
  }
  ABOX_RETURN_IF_ERROR(CheckReadable(spec.kernel, "guest kernel"));
  ABOX_RETURN_IF_ERROR(CheckReadable(spec.initrd, "guest initrd"));
  ABOX_RETURN_IF_ERROR(CheckReadable(spec.rootfs, "root filesystem image"));
  if (spec.cpus < 1 || spec.cpus > 255) {
    return absl::InvalidArgumentError(absl::StrCat("cpus must be 1-255, not ", spec.cpus));
  }
  if (spec.memory_mib < 64 || spec.memory_mib > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_mib must be 64-1048576, not ", spec.memory_mib));
  }
  if (spec.disk_mib < 0 || spec.disk_mib > kMaxDiskMib) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk_mib must be 0-", kMaxDiskMib, ", not ", spec.disk_mib));
  }
  if (spec.console_log_limit_bytes < 4096) {
    return absl::InvalidArgumentError("console_log_limit_bytes must be at least 4096");
  }
  if (spec.kernel_cmdline_extra.find_first_of(std::string("\n\0", 2)) != std::string::npos) {
    return absl::InvalidArgumentError("kernel_cmdline_extra must be one line");
  }
  if (spec.disk_layers.size() > kMaxDiskLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxDiskLayers, " disk layers, not ", spec.disk_layers.size()));
  }
  for (const std::string& layer : spec.disk_layers) {
    ABOX_RETURN_IF_ERROR(CheckReadable(layer, "disk layer"));
  }
  if (spec.memory_file && spec.memory_file->fd < 0) {
    return absl::InvalidArgumentError("memory_file needs an open descriptor");
  }
  if (spec.restore_skips_shared_memory && !spec.memory_file) {
    return absl::InvalidArgumentError(
        "a state saved without its shared memory needs that memory file to restore");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<QemuVmm>> QemuVmm::Create(QemuVmmOptions options) {
  ABOX_ASSIGN_OR_RETURN(options.qemu_binary, FindBinary(options.qemu_binary, kInstallQemu));
  ABOX_ASSIGN_OR_RETURN(options.qemu_img_binary, FindBinary(options.qemu_img_binary, kInstallQemu));
  ABOX_ASSIGN_OR_RETURN(options.shim_path, FindShim(options.shim_path));
  if (options.jail_path.empty()) {
    ABOX_ASSIGN_OR_RETURN(options.jail_path,
                          base::FindCompanionBinary("abox-jail", "ABOX_JAIL_BINARY"));
  }
  if (const char* jail = std::getenv("ABOX_JAIL")) {  // NOLINT(concurrency-mt-unsafe)
    if (std::string_view(jail) == "off") {
      options.jail = false;
      spdlog::warn("ABOX_JAIL=off: QEMU runs without its namespaces, root and per-VM uid");
    } else if (std::string_view(jail) != "on") {
      return absl::InvalidArgumentError(
          absl::StrCat("ABOX_JAIL must be \"on\" or \"off\", not \"", jail, "\""));
    }
  }
  return std::unique_ptr<QemuVmm>(new QemuVmm(std::move(options)));
}

std::optional<uint64_t> QemuVmm::TscKhz() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tsc_khz_) {
    absl::StatusOr<uint64_t> khz = HostTscKhz();
    if (!khz.ok()) {
      spdlog::warn("{}; booting without tsc_early_khz (TCG boots may hang)",
                   khz.status().ToString());
    }
    tsc_khz_ = khz.ok() ? std::optional<uint64_t>(*khz) : std::nullopt;
  }
  return *tsc_khz_;
}

absl::StatusOr<AccelDecision> QemuVmm::ResolveAccelFor(const VmSpec& spec) {
  std::optional<uint64_t> tsc = TscKhz();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = accel_by_kernel_.find(spec.kernel);
      it != accel_by_kernel_.end() && spec.accel == Accel::kAuto) {
    return it->second;
  }
  KvmProbeOptions probe;
  probe.qemu_binary = options_.qemu_binary;
  probe.kernel = spec.kernel;
  probe.cache_path = options_.kvm_probe_cache;
  probe.deadline = options_.kvm_probe_deadline;
  probe.tsc_khz = tsc;
  ABOX_ASSIGN_OR_RETURN(AccelDecision decision,
                        ResolveAccel(spec.accel, HostAccelResolverDeps(probe)));
  if (spec.accel == Accel::kAuto) {
    accel_by_kernel_[spec.kernel] = decision;
  }
  return decision;
}

absl::StatusOr<std::string> QemuVmm::StateFingerprint(const VmSpec& spec) {
  ABOX_RETURN_IF_ERROR(ValidateVmSpec(spec));
  ABOX_ASSIGN_OR_RETURN(AccelDecision accel, ResolveAccelFor(spec));
  std::string out = absl::StrCat("abox ", kVersion, "\n");
  // A file's identity, not its path (the same image may be reached through a link): a rebuilt
  // image or an upgraded QEMU changes its inode, size or mtime.
  auto file = [&out](const char* what, const std::string& path) -> absl::Status {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return base::ErrnoError(absl::StrCat("stat(", path, ")"));
    }
    absl::StrAppend(&out, what, " dev=", st.st_dev, " ino=", st.st_ino, " size=", st.st_size,
                    " mtime=", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, "\n");
    return absl::OkStatus();
  };
  // The disk's size is part of the machine a saved state belongs to (the guest's file system
  // was grown to it).
  absl::StrAppend(&out, "disk_mib=", spec.disk_mib, "\n");
  ABOX_RETURN_IF_ERROR(file("qemu", options_.qemu_binary));
  ABOX_RETURN_IF_ERROR(file("kernel", spec.kernel));
  ABOX_RETURN_IF_ERROR(file("initrd", spec.initrd));
  ABOX_RETURN_IF_ERROR(file("rootfs", spec.rootfs));
  for (const std::string& layer : spec.disk_layers) {
    ABOX_RETURN_IF_ERROR(file("layer", layer));
  }
  // The machine and its devices, exactly as QEMU gets them (descriptor numbers fixed).
  QemuArgvInput in;
  in.qemu_binary = options_.qemu_binary;
  in.id = "fingerprint";
  in.accel = accel.accel;
  in.cpus = spec.cpus;
  in.memory_mib = spec.memory_mib;
  in.kernel_cmdline = FingerprintKernelCmdline(TscKhz(), spec.kernel_cmdline_extra);
  in.overlay_fd = 3;
  in.rootfs_fd = 4;
  for (size_t i = 0; i < spec.disk_layers.size(); ++i) {
    in.layer_fds.push_back(static_cast<int>(5 + i));
  }
  absl::StrAppend(&out, absl::StrJoin(BuildQemuArgv(in), " "), "\n");
  return out;
}

absl::StatusOr<std::unique_ptr<Vm>> QemuVmm::StartVm(const VmSpec& spec) {
  ABOX_RETURN_IF_ERROR(ValidateVmSpec(spec));
  ABOX_ASSIGN_OR_RETURN(AccelDecision accel, ResolveAccelFor(spec));
  if (!accel.warning.empty()) {
    spdlog::warn("{}", accel.warning);
  }
  PrivilegePlan privileges = PlanForHost(accel.accel);
  if (!privileges.warning.empty()) {
    spdlog::warn("{}", privileges.warning);
  }
  ABOX_RETURN_IF_ERROR(MakeRunDir(spec.run_dir));
  std::optional<base::ChildProcess> shim;
  absl::Cleanup undo = [&] {
    shim.reset();  // kills a shim that did not come up (QEMU follows it)
    if (absl::StatusOr<VmState> st = ReadVmState(spec.run_dir); st.ok() && !spec.tie_to_caller) {
      if (auto fd = OpenVerifiedPidfd(st->shim_pid, {"abox-shim", spec.run_dir}); fd.ok()) {
        ::syscall(SYS_pidfd_send_signal, fd->get(), SIGKILL, nullptr, 0);
      }
    }
    (void)RemoveRunDir(spec.run_dir);
  };

  std::string overlay = RunDirPath(spec.run_dir, kOverlayFile);
  // -u: qemu-img does not open the backing chain by the paths recorded in the layers (a layer
  // copied into a checkpoint still names where it was copied from); QEMU gets every layer as a
  // descriptor with its backing node given, and the size is the rootfs's (all layers have it).
  const bool layered = !spec.disk_layers.empty();
  struct stat rootfs_st {};
  if (::stat(spec.rootfs.c_str(), &rootfs_st) != 0) {
    return base::ErrnoError(absl::StrCat("stat(", spec.rootfs, ")"));
  }
  ABOX_ASSIGN_OR_RETURN(int64_t disk_bytes, OverlayBytes(spec, rootfs_st.st_size));
  ABOX_ASSIGN_OR_RETURN(base::CommandResult img,
                        base::RunCommand({options_.qemu_img_binary, "create", "-q", "-u", "-f",
                                          "qcow2", "-F", layered ? "qcow2" : "raw", "-b",
                                          layered ? spec.disk_layers.back() : spec.rootfs, overlay,
                                          absl::StrCat(disk_bytes)}));
  if (img.status.ShellCode() != 0) {
    return absl::InternalError(absl::StrCat("qemu-img create ", overlay, " failed (",
                                            img.status.ToString(), "): ", img.err));
  }

  ShimConfig config;
  config.id = spec.id;
  config.run_dir = spec.run_dir;
  config.qemu_binary = options_.qemu_binary;
  config.jail_binary = options_.jail_path;
  config.jail = options_.jail;
  if (options_.jail) {
    config.namespaces = options_.jail_namespaces.value_or(JailNamespaces(::geteuid() == 0));
  }
  config.accel = accel.accel;
  config.accel_note = accel.warning;
  config.cpus = spec.cpus;
  config.memory_mib = spec.memory_mib;
  config.kernel = spec.kernel;
  config.initrd = spec.initrd;
  config.rootfs = spec.rootfs;
  config.kernel_cmdline = KernelCmdline(TscKhz(), spec.kernel_cmdline_extra);
  config.drop = privileges.drop;
  config.console_log_limit = spec.console_log_limit_bytes;
  config.qemu_log_limit = options_.qemu_log_limit;
  config.ready_timeout_ms = options_.ready_timeout.count();
  config.tie_to_caller = spec.tie_to_caller;
  config.disk_layers = spec.disk_layers;
  if (spec.memory_file) {
    config.memory_fd = spec.memory_file->fd;
    config.memory_shared = spec.memory_file->shared;
  }
  config.incoming = spec.restore_state_fd >= 0;
  ABOX_RETURN_IF_ERROR(base::WriteFileAtomic(RunDirPath(spec.run_dir, kShimConfigFile),
                                             ShimConfigToJson(config), 0600));

  ABOX_ASSIGN_OR_RETURN(base::Pipe ready, base::MakePipe());
  std::optional<base::Pipe> tie;
  if (spec.tie_to_caller) {
    ABOX_ASSIGN_OR_RETURN(tie, base::MakePipe());
  }
  std::string shim_log_path = RunDirPath(spec.run_dir, kShimLog);
  base::UniqueFd shim_log(
      ::open(shim_log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!shim_log) {
    return base::ErrnoError(absl::StrCat("open(", shim_log_path, ")"));
  }
  base::SpawnOptions so;
  so.argv = {options_.shim_path, "--run-dir", spec.run_dir, "--ready-fd",
             absl::StrCat(ready.write.get())};
  so.keep_fds = {ready.write.get()};
  if (spec.memory_file) {
    so.keep_fds.push_back(spec.memory_file->fd);  // QEMU inherits it at the same number
  }
  if (tie) {
    so.argv.insert(so.argv.end(), {"--caller-fd", absl::StrCat(tie->read.get())});
    so.keep_fds.push_back(tie->read.get());
  }
  so.stdout_fd = shim_log.get();
  so.stderr_fd = shim_log.get();
  // Its own session: a Ctrl-C or SIGHUP for the caller's terminal must not hit the VM; with
  // tie_to_caller the pipe, not a signal, ends it.
  so.new_session = true;
  // The shim and QEMU get none of the caller's environment (API keys, SSH_AUTH_SOCK) and none
  // of its descriptors but the two pipes and the log: aboxd or the CLI may hold descriptors
  // without O_CLOEXEC that it inherited.
  so.env = VmmChildEnvironment();
  so.close_other_fds = true;
  ABOX_ASSIGN_OR_RETURN(shim, base::ChildProcess::Spawn(so));
  ready.write.reset();
  if (tie) {
    tie->read.reset();
  }

  Clock::time_point deadline = Clock::now() + options_.ready_timeout + kShimReportMargin;
  absl::StatusOr<std::string> line = ReadReadyLine(ready.read.get(), deadline);
  auto shim_log_tail = [&] { return ReadLogTail(shim_log_path, 1500); };
  if (!line.ok()) {
    return absl::InternalError(absl::StrCat("VM ", spec.id,
                                            " did not start: ", line.status().message(),
                                            "; abox-shim log:\n", shim_log_tail()));
  }
  absl::StatusOr<ShimReady> report = ShimReadyFromJson(*line);
  if (!report.ok()) {
    return absl::InternalError(
        absl::StrCat("VM ", spec.id, " did not start: ", report.status().message()));
  }
  if (!report->ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("VM ", spec.id, " did not start: ", report->error));
  }
  if (spec.restore_state_fd >= 0) {
    absl::Status loaded = [&]() -> absl::Status {
      ABOX_ASSIGN_OR_RETURN(QmpClient qmp, QmpClient::Connect(RunDirPath(spec.run_dir, kQmpSocket),
                                                              milliseconds(3000)));
      return LoadVmState(qmp, spec.restore_state_fd, spec.restore_skips_shared_memory,
                         spec.restore_timeout);
    }();
    if (!loaded.ok()) {
      std::string qemu_said(
          absl::StripAsciiWhitespace(ReadLogTail(RunDirPath(spec.run_dir, kQemuLog), 1500)));
      return absl::Status(loaded.code(),
                          absl::StrCat("VM ", spec.id, " could not be restored: ", loaded.message(),
                                       qemu_said.empty() ? "" : "; QEMU said:\n", qemu_said));
    }
  }

  QemuVm::Parts parts;
  parts.id = spec.id;
  parts.run_dir = spec.run_dir;
  parts.accel = accel.accel;
  parts.accel_note = accel.warning;
  parts.tie_to_caller = spec.tie_to_caller;
  parts.qemu_pid = report->qemu_pid;
  if (auto fd = OpenVerifiedPidfd(report->qemu_pid, {absl::StrCat("abox-", spec.id)}); fd.ok()) {
    parts.qemu_pidfd = *std::move(fd);
  }
  if (spec.tie_to_caller) {
    parts.shim_child.emplace(std::move(*shim));
    shim.reset();
    parts.caller_pipe = std::move(tie->write);
  } else {
    // The process we spawned only forked the real shim and exited; reap it, follow the shim.
    (void)shim->Wait(milliseconds(5000));
    shim.reset();
    // If the shim is already gone (QEMU exited at once), the Vm reports that.
    if (auto fd = OpenVerifiedPidfd(report->shim_pid, {"abox-shim", spec.run_dir}); fd.ok()) {
      parts.shim_pidfd = *std::move(fd);
    }
  }
  std::move(undo).Cancel();
  return QemuVm::Create(std::move(parts));
}

std::vector<std::string> QemuVmm::DiskLayers(const std::string& run_dir) {
  absl::StatusOr<std::string> text = base::ReadFile(RunDirPath(run_dir, kShimConfigFile), 1 << 20);
  if (!text.ok()) {
    return {};
  }
  absl::StatusOr<ShimConfig> config = ShimConfigFromJson(*text);
  return config.ok() ? config->disk_layers : std::vector<std::string>{};
}

absl::StatusOr<std::unique_ptr<Vm>> QemuVmm::Attach(const std::string& run_dir) {
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<QemuVm> vm, QemuVm::Attach(run_dir));
  return vm;
}

}  // namespace abox::vmm
