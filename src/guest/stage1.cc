#include "src/guest/stage1.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/guest/root_grow.h"

namespace abox::guest {
namespace {

constexpr char kMarker[] = "/abox/initramfs";
constexpr char kModulesDir[] = "/abox/modules";
constexpr char kNewRoot[] = "/newroot";
constexpr int kRootWaitMs = 5000;

absl::Status Errno(absl::string_view what) {
  return absl::ErrnoToStatus(errno, what);  // appends ": <strerror>"
}

// Writes all of `s` to the console (fd 2, which the kernel opened on /dev/console).
void ConsoleWrite(absl::string_view s) {
  int fd = 2;
  int opened = -1;
  if (::fcntl(fd, F_GETFD) < 0) {
    opened = ::open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
    fd = opened;
  }
  while (fd >= 0 && !s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    s.remove_prefix(static_cast<size_t>(n));
  }
  if (opened >= 0) {
    ::close(opened);
  }
}

absl::Status Mount(const char* source, const char* target, const char* type, unsigned long flags,
                   const char* data) {
  if (::mkdir(target, 0755) != 0 && errno != EEXIST) {
    return Errno(absl::StrCat("mkdir(", target, ")"));
  }
  if (::mount(source, target, type, flags, data) != 0) {
    return Errno(absl::StrCat("mount(", source, " on ", target, ", ", type ? type : "move", ")"));
  }
  return absl::OkStatus();
}

absl::Status MountEarlyFilesystems() {
  // devtmpfs may already be mounted if the kernel was built with DEVTMPFS_MOUNT.
  if (::mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") != 0 && errno != EBUSY) {
    return Errno("mount(devtmpfs on /dev)");
  }
  if (absl::Status s = Mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "");
      !s.ok()) {
    return s;
  }
  return Mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "");
}

absl::Status LoadModules() {
  for (const std::string& path : ListModuleFiles(kModulesDir)) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return Errno(absl::StrCat("open(", path, ")"));
    }
    long rc = ::syscall(SYS_finit_module, fd, "", 0);
    int err = errno;
    ::close(fd);
    if (rc != 0 && err != EEXIST) {
      errno = err;
      return Errno(absl::StrCat("finit_module(", path, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status WaitForBlockDevice(const std::string& dev) {
  struct timespec start {};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    struct stat st {};
    if (::stat(dev.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
      return absl::OkStatus();
    }
    struct timespec now {};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const long waited_ms =
        (now.tv_sec - start.tv_sec) * 1000L + (now.tv_nsec - start.tv_nsec) / 1000000L;
    if (waited_ms >= kRootWaitMs) {
      return absl::DeadlineExceededError(
          absl::StrCat("root disk ", dev, " did not appear within ", kRootWaitMs / 1000,
                       " s (is there a virtio-blk device, and did virtio_mmio/virtio_blk load?)"));
    }
    struct timespec ts = {0, 5L * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
}

// Copies /init to `dest` as root:root 0755.
absl::Status CopyAgent(const char* dest) {
  int in = ::open("/init", O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    return Errno("open(/init)");
  }
  int out = ::open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0) {
    absl::Status s = Errno(absl::StrCat("open(", dest, ")"));
    ::close(in);
    return s;
  }
  absl::Status status;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      status = Errno("read(/init)");
      break;
    }
    if (n == 0) {
      break;
    }
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(out, buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) {
        continue;
      }
      if (w <= 0) {
        status = Errno(absl::StrCat("write(", dest, ")"));
        break;
      }
      off += w;
    }
    if (!status.ok()) {
      break;
    }
  }
  if (status.ok() && (::fchown(out, 0, 0) != 0 || ::fchmod(out, 0755) != 0)) {
    status = Errno(absl::StrCat("fchown/fchmod(", dest, ")"));
  }
  ::close(in);
  if (::close(out) != 0 && status.ok()) {
    status = Errno(absl::StrCat("close(", dest, ")"));
  }
  return status;
}

// Frees the initramfs copies (rootfs stays in memory otherwise); best effort.
void FreeInitramfs() {
  for (const std::string& path : ListModuleFiles(kModulesDir)) {
    ::unlink(path.c_str());
  }
  ::rmdir(kModulesDir);
  ::unlink(kMarker);
  ::rmdir("/abox");
  ::unlink("/init");
}

}  // namespace

bool IsInitramfsStage() { return ::getpid() == 1 && ::access(kMarker, F_OK) == 0; }

std::string RootDeviceFromCmdline(absl::string_view cmdline) {
  std::string dev = "/dev/vda";
  for (absl::string_view arg :
       absl::StrSplit(cmdline, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&arg, "abox.root=") && absl::StartsWith(arg, "/dev/") &&
        arg.find("..") == absl::string_view::npos) {
      dev = std::string(arg);
    }
  }
  return dev;
}

std::vector<std::string> ListModuleFiles(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return out;
  }
  while (dirent* de = ::readdir(d)) {  // NOLINT(concurrency-mt-unsafe): private DIR stream.
    absl::string_view name = de->d_name;
    if (name.size() > 3 && absl::EndsWith(name, ".ko")) {
      out.push_back(absl::StrCat(dir, "/", name));
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status Stage1() {
  if (absl::Status s = MountEarlyFilesystems(); !s.ok()) {
    return s;
  }
  if (absl::Status s = LoadModules(); !s.ok()) {
    return s;
  }
  std::string cmdline;
  if (int fd = ::open("/proc/cmdline", O_RDONLY | O_CLOEXEC); fd >= 0) {
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    cmdline.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
    ::close(fd);
  }
  const std::string root_dev = RootDeviceFromCmdline(cmdline);
  if (absl::Status s = WaitForBlockDevice(root_dev); !s.ok()) {
    return s;
  }
  if (absl::Status s = Mount(root_dev.c_str(), kNewRoot, "ext4", 0, ""); !s.ok()) {
    return s;
  }
  // Not fatal: a sandbox whose file system could not grow still works, with less room, and the
  // console log says why.
  absl::StatusOr<std::string> grown = GrowRootFilesystem(root_dev, kNewRoot);
  ConsoleWrite(absl::StrCat(
      "abox-guest: stage1: ",
      grown.ok() ? *grown : absl::StrCat("not grown: ", grown.status().message()), "\n"));
  // /run is a fresh root-owned tmpfs: the agent binary lives there, out of the agent user's
  // reach, and nothing in the golden image can shadow it.
  if (absl::Status s = Mount("tmpfs", "/newroot/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
      !s.ok()) {
    return s;
  }
  if (::mkdir("/newroot/run/abox", 0755) != 0 || ::mkdir("/newroot/run/lock", 01777) != 0 ||
      ::chmod("/newroot/run/lock", 01777) != 0) {
    return Errno("mkdir(/newroot/run/abox, /newroot/run/lock)");
  }
  if (absl::Status s = CopyAgent("/newroot/run/abox/abox-guest"); !s.ok()) {
    return s;
  }
  FreeInitramfs();
  for (const char* m : {"/dev", "/proc", "/sys"}) {
    std::string target = absl::StrCat(kNewRoot, m);
    if (absl::Status s = Mount(m, target.c_str(), nullptr, MS_MOVE, nullptr); !s.ok()) {
      return s;
    }
  }
  if (::chdir(kNewRoot) != 0) {
    return Errno("chdir(/newroot)");
  }
  if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) {
    return Errno("mount(--move /newroot /)");
  }
  if (::chroot(".") != 0) {
    return Errno("chroot(/newroot)");
  }
  if (::chdir("/") != 0) {
    return Errno("chdir(/)");
  }
  char arg0[] = "abox-guest";
  char arg1[sizeof(kStage2Flag)];
  std::memcpy(arg1, kStage2Flag, sizeof(kStage2Flag));
  char* argv[] = {arg0, arg1, nullptr};
  ::execv(kStage2Path, argv);
  return Errno(absl::StrCat("execv(", kStage2Path, ")"));
}

void Stage1Fail(absl::string_view message) {
  ConsoleWrite(absl::StrCat("abox-guest: stage1: ", message, "\n"));
  ::sync();
  ::reboot(RB_POWER_OFF);
  ::_exit(1);  // Not PID 1 (tests) or not permitted: as PID 1 this panics, which ends QEMU too.
}

void RunStage1() {
  absl::Status s = Stage1();
  Stage1Fail(s.message());
}

}  // namespace abox::guest
