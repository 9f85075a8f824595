#include "src/vmm/qemu_launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unix_socket.h"
#include "src/vmm/qemu_argv.h"

namespace abox::vmm {
namespace {

absl::StatusOr<base::UniqueFd> OpenFile(const std::string& path, int flags) {
  base::UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  return fd;
}

// Copies `src` into a sealed memfd, which any user can reopen through /proc/self/fd.
absl::StatusOr<base::UniqueFd> CopyToMemfd(int src, const std::string& name) {
  base::UniqueFd mem(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!mem) {
    return base::ErrnoError("memfd_create");
  }
  char buf[1 << 16];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(src, buf, sizeof(buf), offset);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return base::ErrnoError(absl::StrCat("read(", name, ")"));
    }
    if (n == 0) {
      break;
    }
    ABOX_RETURN_IF_ERROR(base::WriteAll(mem.get(), std::string_view(buf, static_cast<size_t>(n))));
    offset += n;
  }
  if (::fcntl(mem.get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) !=
      0) {
    return base::ErrnoError("fcntl(F_ADD_SEALS)");
  }
  return mem;
}

// A read-only descriptor QEMU can reopen as /proc/self/fd/N. After a privilege drop, reopening
// checks the file's mode, so a file "other" cannot read is copied into a memfd first.
absl::StatusOr<base::UniqueFd> OpenForReopen(const std::string& path, bool dropping) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenFile(path, O_RDONLY));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", path, ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (dropping && (st.st_mode & S_IROTH) == 0) {
    return CopyToMemfd(fd.get(), path);
  }
  return fd;
}

}  // namespace

JailOptions JailOptionsFor(const ShimConfig& c, bool namespaces) {
  JailOptions j;
  if (c.drop) {
    j.uid = c.drop->uid;
    j.gid = c.drop->gid;
    j.groups = c.drop->groups;
    // A uid no other process has: the process limit bounds this QEMU alone.
    j.max_processes = kJailMaxProcesses;
  } else if (namespaces) {
    j.user_namespace = true;
  }
  j.max_files = kJailMaxFiles;
  if (namespaces) {
    j.new_root = c.run_dir;
    // What a dynamically linked QEMU needs to exec and run: /usr (binary, libraries, firmware
    // in /usr/share/qemu) and the merged-/usr links (the ELF interpreter is /lib64/...).
    for (const char* path : {"/usr", "/lib", "/lib64", "/etc/ld.so.cache"}) {
      struct stat st {};
      if (::lstat(path, &st) == 0) {
        j.read_only.emplace_back(path);
      }
    }
    std::string qemu_dir = std::filesystem::path(c.qemu_binary).parent_path().string();
    if (!absl::StartsWith(qemu_dir, "/usr/") && qemu_dir != "/usr") {
      j.read_only.push_back(qemu_dir);  // a QEMU of its own, e.g. under /opt
    }
    j.devices = {"null", "zero", "urandom"};
    if (c.accel == Accel::kKvm) {
      j.devices.emplace_back("kvm");
    }
    j.hostname = "abox-qemu";
  }
  return j;
}

absl::StatusOr<LaunchedQemu> LaunchQemu(const ShimConfig& c, const JailOptions& jail,
                                        unsigned long namespaces) {  // NOLINT(google-runtime-int)
  // After a uid change reopening checks "other"'s permission (in a user namespace the caller's
  // own uid is mapped: its files stay its own).
  bool dropping = jail.uid.has_value();
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd kernel, OpenForReopen(c.kernel, dropping));
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd initrd, OpenForReopen(c.initrd, dropping));
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd overlay,
                        OpenFile(RunDirPath(c.run_dir, kOverlayFile), O_RDWR));
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd rootfs, OpenFile(c.rootfs, O_RDONLY));
  std::vector<base::UniqueFd> layers;
  for (const std::string& layer : c.disk_layers) {
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenFile(layer, O_RDONLY));
    layers.push_back(std::move(fd));
  }
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd qmp,
                        base::ListenUnixSocket(RunDirPath(c.run_dir, kQmpSocket)));
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd agent,
                        base::ListenUnixSocket(RunDirPath(c.run_dir, kAgentSocket)));
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return base::ErrnoError("socketpair(console)");
  }
  base::UniqueFd console_ours(pair[0]);
  base::UniqueFd console_qemu(pair[1]);
  // QEMU only writes the console; the shim never writes to it. (Shutting down our write side
  // is no way to say so: QEMU takes the EOF as a disconnect and drops the console.)
  ABOX_ASSIGN_OR_RETURN(base::Pipe output, base::MakePipe());

  QemuArgvInput in;
  in.qemu_binary = c.qemu_binary;
  in.jail_prefix = JailArgv(c.jail_binary, jail);
  in.id = c.id;
  in.accel = c.accel;
  in.cpus = c.cpus;
  in.memory_mib = c.memory_mib;
  in.kernel_path = absl::StrCat("/proc/self/fd/", kernel.get());
  in.initrd_path = absl::StrCat("/proc/self/fd/", initrd.get());
  in.kernel_cmdline = c.kernel_cmdline;
  in.overlay_fd = overlay.get();
  in.rootfs_fd = rootfs.get();
  in.qmp_fd = qmp.get();
  in.agent_fd = agent.get();
  in.console_fd = console_qemu.get();
  for (const base::UniqueFd& fd : layers) {
    in.layer_fds.push_back(fd.get());
  }
  in.memory_fd = c.memory_fd;
  in.memory_shared = c.memory_shared;
  in.incoming = c.incoming;

  base::SpawnOptions o;
  o.argv = BuildQemuArgv(in);
  o.stdout_fd = output.write.get();
  o.stderr_fd = output.write.get();
  o.keep_fds = {kernel.get(), initrd.get(), overlay.get(),     rootfs.get(),
                qmp.get(),    agent.get(),  console_qemu.get()};
  o.keep_fds.insert(o.keep_fds.end(), in.layer_fds.begin(), in.layer_fds.end());
  if (c.memory_fd >= 0) {
    o.keep_fds.push_back(c.memory_fd);
  }
  // Only those descriptors and 0-2 reach QEMU (whatever else the shim may have inherited does
  // not), and none of the caller's environment.
  o.close_other_fds = true;
  o.env = VmmChildEnvironment();
  o.parent_death_signal = SIGKILL;
  o.namespaces = namespaces;
  absl::StatusOr<base::ChildProcess> child = base::ChildProcess::Spawn(o);
  if (!child.ok()) {
    return base::Annotate(child.status(), absl::StrCat("starting ", o.argv[0]));
  }
  LaunchedQemu launched;
  launched.process = *std::move(child);
  launched.console = std::move(console_ours);
  launched.output = std::move(output.read);
  launched.argv = std::move(o.argv);
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(launched.console.get()));
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(launched.output.get()));
  return launched;
}

absl::Status RemoveRunDir(const std::string& run_dir_arg) {
  std::filesystem::path run_dir = std::filesystem::path(run_dir_arg).lexically_normal();
  if (!run_dir.has_filename()) {  // "/a/run/" -> "/a/run"
    run_dir = run_dir.parent_path();
  }
  if (!run_dir.is_absolute() || run_dir == run_dir.root_path()) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to remove run_dir \"", run_dir_arg, "\""));
  }
  // Deletes are fenced to the directory holding the run_dir (base::RemoveFileUnder): a run_dir
  // that was swapped for a symlink deletes nothing where the link points.
  const std::filesystem::path fence = run_dir.parent_path();
  static const std::set<std::string> kKnown = {kOverlayFile,
                                               kQmpSocket,
                                               kAgentSocket,
                                               kConsoleLog,
                                               absl::StrCat(kConsoleLog, ".1"),
                                               kQemuLog,
                                               absl::StrCat(kQemuLog, ".1"),
                                               kShimLog,
                                               kStateFile,
                                               kShimConfigFile};
  std::vector<std::string> names;
  {
    DIR* dir = ::opendir(run_dir.c_str());
    if (dir == nullptr) {
      if (errno == ENOENT) {
        return absl::OkStatus();
      }
      return base::ErrnoError(absl::StrCat("opendir(", run_dir.string(), ")"));
    }
    while (dirent* e = ::readdir(dir)) {  // NOLINT(concurrency-mt-unsafe): private DIR stream
      std::string name = e->d_name;
      if (name != "." && name != "..") {
        names.push_back(std::move(name));
      }
    }
    ::closedir(dir);
  }
  std::vector<std::string> unknown;
  for (const std::string& name : names) {
    // Leftovers of an interrupted atomic write (base::WriteFileAtomic) are ours too.
    bool ours = kKnown.count(name) > 0 || absl::StartsWith(name, ".state.json.tmp") ||
                absl::StartsWith(name, ".shim.json.tmp");
    if (!ours) {
      unknown.push_back(name);
      continue;
    }
    ABOX_RETURN_IF_ERROR(base::RemoveFileUnder(fence, run_dir / name));
  }
  if (!unknown.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("left ", run_dir.string(), " in place: it holds files abox did not create (",
                     absl::StrJoin(unknown, ", "), "); move them out and remove it by hand"));
  }
  return base::RemoveEmptyDirUnder(fence, run_dir);
}

absl::Status MakeRunDir(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(run_dir).parent_path(), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("creating the parent of ", run_dir, ": ", ec.message()));
  }
  if (::mkdir(run_dir.c_str(), 0700) == 0) {
    return absl::OkStatus();
  }
  if (errno != EEXIST) {
    return base::ErrnoError(absl::StrCat("mkdir(", run_dir, ")"));
  }
  struct stat st {};
  if (::lstat(run_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      !std::filesystem::is_empty(run_dir, ec) || ec) {
    return absl::AlreadyExistsError(
        absl::StrCat("run_dir ", run_dir, " already exists and is not an empty directory"));
  }
  if (::chmod(run_dir.c_str(), 0700) != 0) {
    return base::ErrnoError(absl::StrCat("chmod(", run_dir, ")"));
  }
  return absl::OkStatus();
}

}  // namespace abox::vmm
