#include "src/base/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

extern char** environ;

namespace abox::base {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

ExitStatus FromWaitStatus(int wstatus) {
  ExitStatus s;
  if (WIFEXITED(wstatus)) {
    s.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    s.signal = WTERMSIG(wstatus);
  } else {
    s.exit_code = 255;
  }
  return s;
}

#ifndef SYS_close_range
#define SYS_close_range 436  // Linux 5.9; the number is the same on every architecture
#endif

// The descriptors a child keeps when SpawnOptions::close_other_fds is set, as ranges to close,
// prepared before fork() (the child may not allocate).
struct CloseRanges {
  std::vector<std::pair<unsigned, unsigned>> ranges;  // [first, last], inclusive
  unsigned fallback_limit = 0;  // without close_range: close up to here (RLIMIT_NOFILE)
};

CloseRanges PlanCloseRanges(const std::vector<int>& keep_fds, int err_fd) {
  std::vector<unsigned> keep = {0, 1, 2, static_cast<unsigned>(err_fd)};
  for (int fd : keep_fds) {
    if (fd >= 0) {
      keep.push_back(static_cast<unsigned>(fd));
    }
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  CloseRanges plan;
  for (size_t i = 0; i + 1 < keep.size(); ++i) {
    if (keep[i + 1] > keep[i] + 1) {
      plan.ranges.emplace_back(keep[i] + 1, keep[i + 1] - 1);
    }
  }
  plan.ranges.emplace_back(keep.back() + 1, UINT_MAX);
  rlimit limit{};
  plan.fallback_limit = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < (1U << 20)
                            ? static_cast<unsigned>(limit.rlim_cur)
                            : (1U << 20);
  return plan;
}

// Async-signal-safe: closes every descriptor in `plan`'s ranges.
void CloseOtherFds(const CloseRanges& plan) {
  for (const auto& [first, last] : plan.ranges) {
    if (::syscall(SYS_close_range, first, last, 0) == 0) {
      continue;
    }
    // ENOSYS (before Linux 5.9) or EINVAL: one close() per possible descriptor.
    for (unsigned fd = first; fd <= last && fd < plan.fallback_limit; ++fd) {
      ::close(static_cast<int>(fd));
    }
  }
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) {
    out.push_back(const_cast<char*>(s.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

// The maps a child in a new user namespace writes for itself (prepared before fork).
struct UserNamespaceMaps {
  std::string uid_map;
  std::string gid_map;
};

// Async-signal-safe: writes `text` to the procfs file `path`.
bool WriteProcFile(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// Child side of Spawn: async-signal-safe calls only. Reports errno through `err_fd` and exits.
[[noreturn]] void ChildAfterFork(const SpawnOptions& o, const CloseRanges* close_plan, pid_t parent,
                                 const UserNamespaceMaps* maps, char* const* argv,
                                 char* const* envp, const char* path, int err_fd) {
  auto die = [&](int step) {
    int payload[2] = {step, errno};
    (void)!::write(err_fd, payload, sizeof(payload));
    ::_exit(127);
  };
  if (maps != nullptr && (!WriteProcFile("/proc/self/setgroups", "deny") ||
                          !WriteProcFile("/proc/self/uid_map", maps->uid_map) ||
                          !WriteProcFile("/proc/self/gid_map", maps->gid_map))) {
    die(7);
  }
  if (o.parent_death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, o.parent_death_signal) != 0) {
      die(1);
    }
    // In a new PID namespace the parent is outside it and getppid() is 0; the race this check
    // closes (the parent died before prctl) then stays open, and the child's own supervisor
    // (abox-jail re-arms the signal) has to live with it.
    pid_t expected = (o.namespaces & CLONE_NEWPID) != 0 ? 0 : parent;
    if (::getppid() != expected) {
      ::_exit(127);  // The parent is already gone.
    }
  }
  if (o.new_session && ::setsid() < 0) {
    die(2);
  }
  // Reset signal dispositions and the mask so the child starts clean.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t empty;
  ::sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);

  int devnull = -1;
  auto stdio = [&](int src, int dst) {
    if (src < 0) {
      if (devnull < 0) {
        devnull = ::open("/dev/null", O_RDWR);
      }
      src = devnull;
    }
    if (src == dst) {
      int flags = ::fcntl(src, F_GETFD);
      ::fcntl(src, F_SETFD, flags & ~FD_CLOEXEC);
    } else if (::dup2(src, dst) < 0) {
      die(3);
    }
  };
  stdio(o.stdin_fd, 0);
  stdio(o.stdout_fd, 1);
  stdio(o.stderr_fd, 2);
  for (int fd : o.keep_fds) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) {
      die(4);
    }
  }
  if (close_plan != nullptr) {
    // After the dup2s: the sources of 0/1/2 (and /dev/null) go too. The error pipe stays until
    // execve closes it (O_CLOEXEC).
    CloseOtherFds(*close_plan);
  }
  if (o.cwd && ::chdir(o.cwd->c_str()) != 0) {
    die(5);
  }
  ::execve(path, argv, envp);
  die(6);
  __builtin_unreachable();
}

}  // namespace

std::string ExitStatus::ToString() const {
  if (exit_code) {
    return absl::StrCat("exit code ", *exit_code);
  }
  return absl::StrCat("killed by signal ", signal.value_or(0), " (", strsignal(signal.value_or(0)),
                      ")");
}

std::optional<std::string> FindExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) {
      return name;
    }
    return std::nullopt;
  }
  const char* path = ::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): read-only use.
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  for (absl::string_view dir : absl::StrSplit(p, ':')) {
    if (dir.empty()) {
      continue;
    }
    std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

absl::StatusOr<ChildProcess> ChildProcess::Spawn(const SpawnOptions& o) {
  if (o.argv.empty()) {
    return absl::InvalidArgumentError("Spawn: empty argv");
  }
  std::optional<std::string> path = FindExecutable(o.argv[0]);
  if (!path) {
    return absl::NotFoundError(absl::StrCat(o.argv[0], ": command not found in PATH"));
  }
  std::vector<char*> argv = CStrings(o.argv);
  std::vector<std::string> env_copy;
  std::vector<char*> envp;
  char* const* env_ptr = environ;
  if (o.env) {
    envp = CStrings(*o.env);
    env_ptr = envp.data();
  }
  ABOX_ASSIGN_OR_RETURN(Pipe err_pipe, MakePipe());
  std::optional<CloseRanges> close_plan;
  if (o.close_other_fds) {
    close_plan = PlanCloseRanges(o.keep_fds, err_pipe.write.get());
  }
  std::optional<UserNamespaceMaps> maps;
  if ((o.namespaces & CLONE_NEWUSER) != 0) {
    maps = UserNamespaceMaps{.uid_map = absl::StrCat("0 ", ::geteuid(), " 1"),
                             .gid_map = absl::StrCat("0 ", ::getegid(), " 1")};
  }
  pid_t parent = ::getpid();
  // clone without a new stack behaves as fork; glibc's fork handlers do not run, which is fine:
  // the child only makes async-signal-safe calls before exec.
  pid_t pid = o.namespaces == 0 ? ::fork()
                                : static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD | o.namespaces,
                                                               nullptr, nullptr, nullptr, 0));
  if (pid < 0) {
    return ErrnoError(o.namespaces == 0 ? "fork" : "clone(new namespaces)");
  }
  if (pid == 0) {
    ChildAfterFork(o, close_plan ? &*close_plan : nullptr, parent, maps ? &*maps : nullptr,
                   argv.data(), env_ptr, path->c_str(), err_pipe.write.get());
  }
  err_pipe.write.reset();
  UniqueFd pidfd(PidfdOpen(pid));
  ChildProcess child(pid, std::move(pidfd));
  if (!child.pidfd_) {
    return ErrnoError("pidfd_open");
  }
  int payload[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(err_pipe.read.get(), payload, sizeof(payload));
  } while (n < 0 && errno == EINTR);
  if (n == sizeof(payload)) {
    child.KillAndReap();
    static constexpr const char* kSteps[] = {
        "",       "prctl(PDEATHSIG)",
        "setsid", "dup2",
        "fcntl",  "chdir",
        "execve", "clone(new namespaces): writing the user namespace's maps"};
    int step = payload[0] >= 1 && payload[0] <= 7 ? payload[0] : 0;
    return ErrnoError(absl::StrCat(kSteps[step], "(", o.argv[0], ")"), payload[1]);
  }
  return child;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::move(other.pidfd_);
    status_ = std::move(other.status_);
  }
  return *this;
}

ChildProcess::~ChildProcess() { KillAndReap(); }

absl::Status ChildProcess::Kill(int sig) {
  if (!running()) {
    return absl::OkStatus();
  }
  if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) != 0 && errno != ESRCH) {
    return ErrnoError("pidfd_send_signal");
  }
  return absl::OkStatus();
}

std::optional<ExitStatus> ChildProcess::TryWait() {
  if (status_ || pid_ <= 0) {
    return status_;
  }
  status_ = TryReap(pid_);
  return status_;
}

std::optional<ExitStatus> TryReap(pid_t pid) {
  int wstatus = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &wstatus, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid) {
    return FromWaitStatus(wstatus);
  }
  if (r < 0 && errno == ECHILD) {
    return ExitStatus{.exit_code = 255};  // Reaped elsewhere; nothing more to learn.
  }
  return std::nullopt;
}

absl::StatusOr<ExitStatus> ChildProcess::Wait(std::optional<std::chrono::milliseconds> timeout) {
  if (pid_ <= 0) {
    return absl::FailedPreconditionError("no child");
  }
  auto deadline = timeout ? std::chrono::steady_clock::now() + *timeout
                          : std::chrono::steady_clock::time_point::max();
  for (;;) {
    if (auto s = TryWait()) {
      return *s;
    }
    int wait_ms = -1;
    if (timeout) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " still running"));
      }
      wait_ms = static_cast<int>(left.count());
    }
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, wait_ms) < 0 && errno != EINTR) {
      return ErrnoError("poll(pidfd)");
    }
  }
}

void ChildProcess::KillAndReap() {
  if (!running()) {
    return;
  }
  (void)Kill(SIGKILL);
  (void)Wait();
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         size_t output_limit) {
  ABOX_ASSIGN_OR_RETURN(Pipe out, MakePipe());
  ABOX_ASSIGN_OR_RETURN(Pipe err, MakePipe());
  SpawnOptions o;
  o.argv = argv;
  o.stdout_fd = out.write.get();
  o.stderr_fd = err.write.get();
  ABOX_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  out.write.reset();
  err.write.reset();
  CommandResult result;
  // Drain both pipes concurrently so a chatty stderr cannot deadlock a full stdout.
  std::string* bufs[2] = {&result.out, &result.err};
  pollfd fds[2] = {{out.read.get(), POLLIN, 0}, {err.read.get(), POLLIN, 0}};
  int open_count = 2;
  char buf[16384];
  while (open_count > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ErrnoError("poll");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) {
        continue;
      }
      ABOX_ASSIGN_OR_RETURN(size_t n, ReadSome(fds[i].fd, buf, sizeof(buf)));
      if (n == 0) {
        fds[i].fd = -1;
        --open_count;
      } else if (bufs[i]->size() < output_limit) {
        bufs[i]->append(buf, std::min(n, output_limit - bufs[i]->size()));
      }
    }
  }
  ABOX_ASSIGN_OR_RETURN(result.status, child.Wait());
  return result;
}

}  // namespace abox::base
