#include "src/guest/pid1.h"

#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/guest/log.h"

namespace abox::guest {
namespace {

struct MountSpec {
  const char* source;
  const char* target;
  const char* type;
  unsigned long flags;
  const char* data;
  mode_t dir_mode;
};

// Why each option: nosuid/nodev/noexec where nothing legitimate needs them; devpts with a
// world-usable ptmx and tty-group slaves (what posix_openpt expects).
constexpr MountSpec kMounts[] = {
    {"proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, 0555},
    {"sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, 0555},
    {"devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755", 0755},
    {"devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "ptmxmode=0666,gid=5,mode=0620", 0755},
    {"shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777},
    {"tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777},
};

// True when `path` is a mount point (its device differs from its parent's).
bool IsMountPoint(const std::string& path) {
  struct stat self {};
  struct stat parent {};
  if (::stat(path.c_str(), &self) != 0 || ::stat(absl::StrCat(path, "/..").c_str(), &parent) != 0) {
    return false;
  }
  return self.st_dev != parent.st_dev || self.st_ino == parent.st_ino;
}

absl::Status MountOne(const MountSpec& m) {
  if (IsMountPoint(m.target)) {
    return absl::OkStatus();  // Stage 1 moved it here already.
  }
  if (::mkdir(m.target, m.dir_mode) != 0 && errno != EEXIST) {
    return base::ErrnoError(absl::StrCat("mkdir(", m.target, ")"));
  }
  if (::mount(m.source, m.target, m.type, m.flags, m.data) != 0) {
    return base::ErrnoError(absl::StrCat("mount(", m.type, " on ", m.target, ")"));
  }
  return absl::OkStatus();
}

absl::Status LinkDevFiles() {
  // devtmpfs has no /dev/fd or /dev/std*; bash process substitution and many scripts need them.
  static constexpr const char* kLinks[][2] = {{"/proc/self/fd", "/dev/fd"},
                                              {"/proc/self/fd/0", "/dev/stdin"},
                                              {"/proc/self/fd/1", "/dev/stdout"},
                                              {"/proc/self/fd/2", "/dev/stderr"}};
  for (const auto& link : kLinks) {
    if (::symlink(link[0], link[1]) != 0 && errno != EEXIST) {
      return base::ErrnoError(absl::StrCat("symlink(", link[1], ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status BringUpLoopback() {
  base::UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) {
    return base::ErrnoError("socket(AF_INET)");
  }
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) {
    return base::ErrnoError("ioctl(lo, SIOCGIFFLAGS)");
  }
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) {
    return base::ErrnoError("ioctl(lo, SIOCSIFFLAGS)");
  }
  return absl::OkStatus();
}

sigset_t HandledSignals() {
  sigset_t set;
  ::sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPWR}) {
    ::sigaddset(&set, sig);
  }
  return set;
}

// The kernel's fixed inode number of the initial PID namespace (PROC_PID_INIT_INO).
constexpr ino_t kInitialPidNamespaceInode = 0xEFFFFFFCU;

// False when we are PID 1 of a PID namespace inside another system (a container); true in the
// VM, and when it cannot be told (no /proc).
bool InInitialPidNamespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) {
    return true;
  }
  return st.st_ino == kInitialPidNamespaceInode;
}

// Reaps children until none are left or `ms` have passed.
void ReapFor(int ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    int status;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      continue;
    }
    if (pid < 0 && errno == EINTR) {
      continue;
    }
    if (pid < 0 || std::chrono::steady_clock::now() >= deadline) {
      return;  // ECHILD: nobody is left.
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

absl::Status SetUpSystem() {
  absl::Status first;
  auto note = [&](const absl::Status& s) {
    if (!s.ok()) {
      Log(absl::StrCat("setup: ", s.message()));
      first.Update(s);
    }
  };
  ::umask(022);
  for (const MountSpec& m : kMounts) {
    note(MountOne(m));
  }
  note(LinkDevFiles());
  // cgroup v2, for commands whose leftovers must die with them (ExecCgroup). Optional: without
  // it they are killed by process group only, so a failure is logged, not fatal.
  if (absl::Status s = MountOne({"cgroup2", "/sys/fs/cgroup", "cgroup2",
                                 MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, 0555});
      !s.ok()) {
    Log(absl::StrCat("setup: ", s.message(), " (commands' leftovers are killed by process group)"));
  }
  if (::sethostname(kHostname, std::strlen(kHostname)) != 0) {
    note(base::ErrnoError("sethostname"));
  }
  note(BringUpLoopback());
  // Ctrl-Alt-Del becomes SIGINT to us (ignored) instead of an immediate reboot.
  if (::reboot(RB_DISABLE_CAD) != 0) {
    note(base::ErrnoError("reboot(RB_DISABLE_CAD)"));
  }
  return first;
}

bool IsMachineInit() { return ::getpid() == 1 && InInitialPidNamespace(); }

absl::StatusOr<base::UniqueFd> TakeOverSignals() {
  sigset_t set = HandledSignals();
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
    return base::ErrnoError("pthread_sigmask");
  }
  base::UniqueFd fd(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd) {
    return base::ErrnoError("signalfd");
  }
  return fd;
}

void PowerOff() {
  Log("powering off");
  ::kill(-1, SIGTERM);  // Every process but PID 1.
  ReapFor(kShutdownGraceMs);
  ::kill(-1, SIGKILL);
  ReapFor(kShutdownGraceMs);
  ::sync();
  if (!InInitialPidNamespace()) {
    // PID 1 of a container (tests, or a future container runtime): the root filesystem is not
    // ours to remount, and reboot() below only ends the namespace.
    Log("not the machine's init: leaving / mounted as it is");
  } else if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    Log(absl::StrCat("remounting / read-only: ", ErrnoText(errno)));
  }
  ::sync();
  ::reboot(RB_POWER_OFF);
  Log(absl::StrCat("reboot(RB_POWER_OFF): ", ErrnoText(errno)));
  for (;;) {
    ::pause();  // PID 1 must not exit.
  }
}

void PowerOffAfterFailure(absl::string_view why) {
  Log(absl::StrCat("fatal: ", why));
  PowerOff();
}

}  // namespace abox::guest
