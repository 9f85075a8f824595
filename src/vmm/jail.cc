#include "src/vmm/jail.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::vmm {
namespace {

absl::Status Errno(absl::string_view what) { return base::ErrnoError(what); }

// The flags a read-only bind of `source` must keep: in a user namespace the kernel refuses to
// clear nosuid / nodev / noexec / the atime flags its source mount has (they are locked).
unsigned long LockedFlags(const std::string& source) {  // NOLINT(google-runtime-int)
  struct statvfs sv {};
  if (::statvfs(source.c_str(), &sv) != 0) {
    return 0;
  }
  unsigned long flags = 0;  // NOLINT(google-runtime-int)
  if ((sv.f_flag & ST_NOEXEC) != 0) {
    flags |= MS_NOEXEC;
  }
  if ((sv.f_flag & ST_NOATIME) != 0) {
    flags |= MS_NOATIME;
  }
  if ((sv.f_flag & ST_NODIRATIME) != 0) {
    flags |= MS_NODIRATIME;
  }
  if ((sv.f_flag & ST_RELATIME) != 0) {
    flags |= MS_RELATIME;
  }
  return flags;
}

// Binds `source` (a directory or file) read-only at the same path under `root`. A symlink (the
// merged-/usr /lib -> usr/lib) is recreated as the same symlink instead.
absl::Status BindReadOnly(const std::string& root, const std::string& source) {
  std::string target = absl::StrCat(root, source);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(target).parent_path(), ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("mkdir ", target, ": ", ec.message()));
  }
  struct stat st {};
  if (::lstat(source.c_str(), &st) != 0) {
    return Errno(absl::StrCat("lstat(", source, ")"));
  }
  if (S_ISLNK(st.st_mode)) {
    std::filesystem::path link = std::filesystem::read_symlink(source, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("readlink ", source, ": ", ec.message()));
    }
    if (::symlink(link.c_str(), target.c_str()) != 0) {
      return Errno(absl::StrCat("symlink(", target, ")"));
    }
    return absl::OkStatus();
  }
  if (S_ISDIR(st.st_mode)) {
    if (::mkdir(target.c_str(), 0755) != 0 && errno != EEXIST) {
      return Errno(absl::StrCat("mkdir(", target, ")"));
    }
  } else {
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
    if (fd < 0) {
      return Errno(absl::StrCat("create(", target, ")"));
    }
    ::close(fd);
  }
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return Errno(absl::StrCat("bind mount ", source));
  }
  if (::mount(nullptr, target.c_str(), nullptr,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | LockedFlags(source),
              nullptr) != 0) {
    return Errno(absl::StrCat("remount ", source, " read-only"));
  }
  return absl::OkStatus();
}

// Binds /dev/<name> (a device node) into the new root's /dev. Device nodes cannot be made in a
// user namespace; a bind of the host's node can.
absl::Status BindDevice(const std::string& root, const std::string& name) {
  std::string source = absl::StrCat("/dev/", name);
  std::string target = absl::StrCat(root, "/dev/", name);
  int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
  if (fd < 0) {
    return Errno(absl::StrCat("create(", target, ")"));
  }
  ::close(fd);
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return Errno(absl::StrCat("bind mount ", source));
  }
  return absl::OkStatus();
}

absl::Status BuildAndEnterRoot(const JailOptions& o) {
  const std::string& root = o.new_root;
  // A mount namespace of this process's own, whatever its caller did: the mounts and the
  // pivot below can never touch the namespace it was started in.
  if (::unshare(CLONE_NEWNS) != 0) {
    return Errno("unshare(CLONE_NEWNS)");
  }
  // Nothing mounted here propagates back to the namespace it came from.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Errno("make / private");
  }
  if (::mount("abox-jail", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0755,size=1m,nr_inodes=256") != 0) {
    return Errno(absl::StrCat("mount tmpfs on ", root));
  }
  for (const std::string& dir : o.read_only) {
    ABOX_RETURN_IF_ERROR(BindReadOnly(root, dir));
  }
  for (const char* dir : {"/dev", "/proc"}) {
    std::string path = absl::StrCat(root, dir);
    if (::mkdir(path.c_str(), 0755) != 0) {
      return Errno(absl::StrCat("mkdir(", path, ")"));
    }
  }
  for (const std::string& dev : o.devices) {
    ABOX_RETURN_IF_ERROR(BindDevice(root, dev));
  }
  // A procfs of the jail's own PID namespace: QEMU sees itself only, and reopens the descriptors
  // the shim handed it as /proc/self/fd/N.
  std::string proc = absl::StrCat(root, "/proc");
  if (::mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return Errno("mount proc");
  }
  if (::mount(nullptr, root.c_str(), nullptr,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return Errno("remount the new root read-only");
  }
  // pivot_root(".", "."): the old root ends up under the new one and is detached at once.
  if (::chdir(root.c_str()) != 0) {
    return Errno(absl::StrCat("chdir(", root, ")"));
  }
  if (::syscall(SYS_pivot_root, ".", ".") != 0) {
    return Errno("pivot_root");
  }
  if (::umount2(".", MNT_DETACH) != 0) {
    return Errno("detach the old root");
  }
  if (::chdir("/") != 0) {
    return Errno("chdir(/)");
  }
  // A /dev/null inherited as stdin is the old root's, which is gone: take the jail's own, so
  // that the descriptor reads as /dev/null from the host too.
  struct stat in {};
  if (::fstat(0, &in) == 0 && S_ISCHR(in.st_mode) && in.st_rdev == ::makedev(1, 3)) {
    int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) {
      ::dup2(null_fd, 0);
      ::close(null_fd);
    }
  }
  return absl::OkStatus();
}

absl::Status SetLimit(int resource, uint64_t value, const char* name) {
  rlimit limit{.rlim_cur = value, .rlim_max = value};
  if (::setrlimit(resource, &limit) != 0) {
    return Errno(absl::StrCat("setrlimit(", name, ")"));
  }
  return absl::OkStatus();
}

// No capability can be gained again: empties the bounding set (needs CAP_SETPCAP).
absl::Status DropBoundingSet() {
  for (int cap = 0; cap <= 63; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) {
        break;  // past the kernel's last capability
      }
      return Errno(absl::StrCat("drop capability ", cap, " from the bounding set"));
    }
  }
  return absl::OkStatus();
}

// No capability in the effective, permitted, inheritable or ambient set.
absl::Status ClearCapabilities() {
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    return Errno("clear ambient capabilities");
  }
  __user_cap_header_struct header{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &header, data) != 0) {
    return Errno("capset(none)");
  }
  return absl::OkStatus();
}

}  // namespace

unsigned long JailNamespaces(bool as_root) {  // NOLINT(google-runtime-int)
  unsigned long flags =                       // NOLINT(google-runtime-int)
      CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP;
  if (!as_root) {
    flags |= CLONE_NEWUSER;
  }
  return flags;
}

std::string NamespaceNames(uint64_t flags) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {CLONE_NEWNS, "mnt"},   {CLONE_NEWPID, "pid"}, {CLONE_NEWIPC, "ipc"},
      {CLONE_NEWUTS, "uts"},  {CLONE_NEWNET, "net"}, {CLONE_NEWCGROUP, "cgroup"},
      {CLONE_NEWUSER, "user"}};
  std::vector<std::string> names;
  for (const auto& [flag, name] : kNames) {
    if ((flags & flag) != 0) {
      names.emplace_back(name);
    }
  }
  return absl::StrJoin(names, " ");
}

std::vector<std::string> JailArgv(const std::string& jail_binary, const JailOptions& o) {
  std::vector<std::string> a = {jail_binary};
  if (o.uid) {
    a.push_back(absl::StrCat("--uid=", *o.uid));
  }
  if (o.gid) {
    a.push_back(absl::StrCat("--gid=", *o.gid));
  }
  if (!o.groups.empty()) {
    a.push_back(absl::StrCat("--groups=", absl::StrJoin(o.groups, ",")));
  }
  if (o.user_namespace) {
    a.emplace_back("--userns");
  }
  if (!o.new_root.empty()) {
    a.push_back(absl::StrCat("--root=", o.new_root));
  }
  for (const std::string& dir : o.read_only) {
    a.push_back(absl::StrCat("--ro=", dir));
  }
  for (const std::string& dev : o.devices) {
    a.push_back(absl::StrCat("--dev=", dev));
  }
  if (o.max_files != 0) {
    a.push_back(absl::StrCat("--nofile=", o.max_files));
  }
  if (o.max_processes != 0) {
    a.push_back(absl::StrCat("--nproc=", o.max_processes));
  }
  if (!o.hostname.empty()) {
    a.push_back(absl::StrCat("--hostname=", o.hostname));
  }
  a.emplace_back("--");
  return a;
}

absl::StatusOr<JailOptions> ParseJailArgv(const std::vector<std::string>& args,
                                          size_t* command_start) {
  JailOptions o;
  auto number = [](absl::string_view flag, absl::string_view text, auto* out) -> absl::Status {
    if (!absl::SimpleAtoi(text, out)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": not a number: \"", text, "\""));
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError("no command after --");
      }
      *command_start = i + 1;
      return o;
    }
    if (arg == "--userns") {
      o.user_namespace = true;
      continue;
    }
    size_t eq = arg.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument \"", arg, "\""));
    }
    absl::string_view flag = arg.substr(0, eq);
    absl::string_view value = arg.substr(eq + 1);
    if (flag == "--uid") {
      uid_t uid = 0;
      ABOX_RETURN_IF_ERROR(number(flag, value, &uid));
      o.uid = uid;
    } else if (flag == "--gid") {
      gid_t gid = 0;
      ABOX_RETURN_IF_ERROR(number(flag, value, &gid));
      o.gid = gid;
    } else if (flag == "--groups") {
      for (absl::string_view g : absl::StrSplit(value, ',')) {
        gid_t gid = 0;
        ABOX_RETURN_IF_ERROR(number(flag, g, &gid));
        o.groups.push_back(gid);
      }
    } else if (flag == "--root") {
      o.new_root = std::string(value);
    } else if (flag == "--ro") {
      o.read_only.emplace_back(value);
    } else if (flag == "--dev") {
      o.devices.emplace_back(value);
    } else if (flag == "--nofile") {
      ABOX_RETURN_IF_ERROR(number(flag, value, &o.max_files));
    } else if (flag == "--nproc") {
      ABOX_RETURN_IF_ERROR(number(flag, value, &o.max_processes));
    } else if (flag == "--hostname") {
      o.hostname = std::string(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument \"", arg, "\""));
    }
  }
  return absl::InvalidArgumentError("missing -- before the command");
}

absl::Status EnterJail(const JailOptions& o) {
  if (o.user_namespace && o.uid) {
    return absl::InvalidArgumentError("--userns and --uid exclude each other");
  }
  for (const std::string& path : o.read_only) {
    if (path.empty() || path[0] != '/' || path.find("..") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--ro needs an absolute path: ", path));
    }
  }
  for (const std::string& dev : o.devices) {
    if (dev.empty() || dev.find('/') != std::string::npos || dev == "." || dev == "..") {
      return absl::InvalidArgumentError(absl::StrCat("--dev needs a name under /dev: ", dev));
    }
  }
  if (!o.new_root.empty()) {
    ABOX_RETURN_IF_ERROR(BuildAndEnterRoot(o));
  }
  if (!o.hostname.empty() && ::sethostname(o.hostname.data(), o.hostname.size()) != 0) {
    return Errno("sethostname");
  }
  ABOX_RETURN_IF_ERROR(SetLimit(RLIMIT_CORE, 0, "RLIMIT_CORE"));
  if (o.max_files != 0) {
    ABOX_RETURN_IF_ERROR(SetLimit(RLIMIT_NOFILE, o.max_files, "RLIMIT_NOFILE"));
  }
  if (o.max_processes != 0) {
    ABOX_RETURN_IF_ERROR(SetLimit(RLIMIT_NPROC, o.max_processes, "RLIMIT_NPROC"));
  }
  if (o.uid || o.user_namespace) {
    // Before the uid change, which takes CAP_SETPCAP away.
    ABOX_RETURN_IF_ERROR(DropBoundingSet());
  }
  if (o.user_namespace) {
    // uid 0 of this namespace gains no capability from an exec, now or later.
    if (::prctl(PR_SET_SECUREBITS,
                SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                    SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                    SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                0, 0, 0) != 0) {
      return Errno("prctl(SET_SECUREBITS)");
    }
  }
  if (o.uid) {
    if (::setgroups(o.groups.size(), o.groups.data()) != 0) {
      return Errno("setgroups");
    }
    gid_t gid = o.gid.value_or(*o.uid);
    if (::setresgid(gid, gid, gid) != 0) {
      return Errno("setresgid");
    }
    if (::setresuid(*o.uid, *o.uid, *o.uid) != 0) {
      return Errno("setresuid");
    }
  }
  ABOX_RETURN_IF_ERROR(ClearCapabilities());
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Errno("prctl(NO_NEW_PRIVS)");
  }
  // A credential change clears the parent-death signal; QEMU must still die with the shim.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
    return Errno("prctl(PDEATHSIG)");
  }
  return absl::OkStatus();
}

}  // namespace abox::vmm
