#include "src/guest/exec.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/guest/log.h"
#include "src/guest/oom_kills.h"

namespace abox::guest {
namespace {

// What failed in the child before exec, reported through a close-on-exec pipe.
enum ChildStep : int {
  kStepFds = 1,
  kStepSetsid,
  kStepCtty,
  kStepDup,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepCwd,
  kStepExec,
  kStepCgroup,
};

struct ChildReport {
  int step = 0;
  int err = 0;
};

// Everything the child needs, prepared before fork() so that the child only makes
// async-signal-safe calls (no allocation, no locks, no strerror).
struct ChildPlan {
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  char* const* candidates = nullptr;  // paths to try, in PATH order
  size_t n_candidates = 0;
  const char* shell = nullptr;
  char** sh_argv = nullptr;  // {"/bin/sh", <candidate>, argv[1..]}: execvp's ENOEXEC fallback
  const char* cwd = nullptr;
  int stdio[3] = {-1, -1, -1};
  int pty_slave = -1;
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  size_t n_groups = 0;
  int report_fd = -1;
  int cgroup_procs_fd = -1;  // the child joins this cgroup (writes "0") while still root
  // Signals the agent ignores: SIG_IGN survives execve, so the child resets these. (Handled
  // signals fall back to SIG_DFL on exec by themselves.)
  int ignored[NSIG] = {};
  size_t n_ignored = 0;
};

constexpr char kShell[] = "/bin/sh";

[[noreturn]] void RunChild(ChildPlan& p);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Sanitizer runtimes do not support instrumented code in a CLONE_VM child: plain fork.
pid_t SpawnChild(ChildPlan& plan) {
  pid_t pid = ::fork();
  if (pid == 0) {
    RunChild(plan);
  }
  return pid;
}
#else
int ChildEntry(void* plan) { RunChild(*static_cast<ChildPlan*>(plan)); }

// clone(CLONE_VM | CLONE_VFORK), like posix_spawn: the child shares our memory until it execs
// (or _exits) and we are suspended meanwhile, so no page tables are copied. Under TCG that makes
// a measurable part of the exec cost (docs/BENCHMARKS.md). The child runs on its own stack and
// writes only to `plan`, which we do not read afterwards. The agent is single-threaded; the
// stack is per thread anyway so that several agents can share a process (the fake VMM of the
// daemon's tests runs one per "VM").
pid_t SpawnChild(ChildPlan& plan) {
  alignas(64) static thread_local char stack[256 * 1024];
  return ::clone(ChildEntry, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
}
#endif

[[noreturn]] void ChildFail(const ChildPlan& p, int step, int err, int code) {
  ChildReport r{step, err};
  (void)!::write(p.report_fd, &r, sizeof(r));
  ::_exit(code);
}

bool IsPathLookupMiss(int err) {
  // The errors execvp() skips over to try the next PATH entry.
  return err == ENOENT || err == ENOTDIR || err == ESTALE || err == ENODEV || err == ETIMEDOUT;
}

// Runs in the child after fork(): async-signal-safe calls only.
[[noreturn]] void RunChild(ChildPlan& p) {
  // Move the stdio sources above 2 so the dup2()s below cannot clobber each other.
  for (int& fd : p.stdio) {
    if (fd >= 0 && fd < 3) {
      fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
      if (fd < 0) {
        ChildFail(p, kStepFds, errno, kExitCannotRun);
      }
    }
  }
  if (::setsid() < 0) {
    ChildFail(p, kStepSetsid, errno, kExitCannotRun);
  }
  if (p.pty_slave >= 0 && ::ioctl(p.pty_slave, TIOCSCTTY, 0) != 0) {
    ChildFail(p, kStepCtty, errno, kExitCannotRun);
  }
  for (int i = 0; i < 3; ++i) {
    if (::dup2(p.stdio[i], i) < 0) {
      ChildFail(p, kStepDup, errno, kExitCannotRun);
    }
  }
  if (p.cgroup_procs_fd >= 0 && ::write(p.cgroup_procs_fd, "0", 1) != 1) {
    ChildFail(p, kStepCgroup, errno, kExitCannotRun);
  }
  if (p.switch_user) {
    // Raw syscalls: they change only this (the only) thread, with no libc bookkeeping.
    if (::syscall(SYS_setgroups, p.n_groups, p.groups) != 0) {
      ChildFail(p, kStepGroups, errno, kExitCannotRun);
    }
    if (::syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) {
      ChildFail(p, kStepGid, errno, kExitCannotRun);
    }
    if (::syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) {
      ChildFail(p, kStepUid, errno, kExitCannotRun);
    }
  }
  if (::chdir(p.cwd) != 0) {
    ChildFail(p, kStepCwd, errno, kExitCannotRun);
  }
  // Start clean: default dispositions (the agent ignores SIGPIPE) and an empty mask (PID 1
  // blocks the signals it reads from a signalfd).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (size_t i = 0; i < p.n_ignored; ++i) {
    ::sigaction(p.ignored[i], &dfl, nullptr);
  }
  sigset_t empty;
  ::sigemptyset(&empty);
  ::pthread_sigmask(SIG_SETMASK, &empty, nullptr);

  bool saw_eacces = false;
  for (size_t i = 0; i < p.n_candidates; ++i) {
    ::execve(p.candidates[i], p.argv, p.envp);
    int err = errno;
    if (err == ENOEXEC) {
      // Like execvp: a file without a #! line is a shell script.
      p.sh_argv[1] = p.candidates[i];
      ::execve(p.shell, p.sh_argv, p.envp);
      err = errno;
    }
    if (err == EACCES) {
      saw_eacces = true;
      continue;
    }
    if (IsPathLookupMiss(err)) {
      continue;
    }
    ChildFail(p, kStepExec, err, kExitCannotRun);
  }
  if (saw_eacces) {
    ChildFail(p, kStepExec, EACCES, kExitCannotRun);
  }
  ChildFail(p, kStepExec, ENOENT, kExitNotFound);
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (auto& s : v) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

// Where execvp() would look for `name`.
std::vector<std::string> Candidates(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) {
    return {name};
  }
  std::vector<std::string> out;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    out.push_back(absl::StrCat(dir.empty() ? "." : dir, "/", name));
  }
  return out;
}

std::string ErrorText(const ChildReport& r, const SpawnSpec& spec) {
  std::string why = ErrnoText(r.err);
  const std::string& name = spec.argv[0];
  switch (r.step) {
    case kStepExec:
      if (r.err == ENOENT && name.find('/') == std::string::npos) {
        return absl::StrCat(name, ": command not found");
      }
      return absl::StrCat(name, ": ", why);
    case kStepCwd:
      return absl::StrCat("cwd ", spec.cwd, ": ", why);
    case kStepSetsid:
      return absl::StrCat("setsid: ", why);
    case kStepCtty:
      return absl::StrCat("ioctl(TIOCSCTTY): ", why);
    case kStepCgroup:
      return absl::StrCat("joining the command's cgroup: ", why);
    case kStepGroups:
    case kStepGid:
    case kStepUid:
      return absl::StrCat("switching to user ", spec.switch_to ? spec.switch_to->name : "?", ": ",
                          why);
    default:
      return absl::StrCat("setting up stdio: ", why);
  }
}

struct Pty {
  base::UniqueFd master;
  base::UniqueFd slave;
};

absl::StatusOr<Pty> OpenPty(const proto::PtySize& size, const std::optional<Identity>& owner) {
  Pty pty;
  pty.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.master) {
    return base::ErrnoError("posix_openpt");
  }
  if (::grantpt(pty.master.get()) != 0 || ::unlockpt(pty.master.get()) != 0) {
    return base::ErrnoError("unlockpt");
  }
  char name[128];
  if (::ptsname_r(pty.master.get(), name, sizeof(name)) != 0) {
    return base::ErrnoError("ptsname_r");
  }
  pty.slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.slave) {
    return base::ErrnoError(absl::StrCat("open(", name, ")"));
  }
  struct winsize ws {};
  ws.ws_row = size.rows;
  ws.ws_col = size.cols;
  if (::ioctl(pty.master.get(), TIOCSWINSZ, &ws) != 0) {
    return base::ErrnoError("ioctl(TIOCSWINSZ)");
  }
  if (owner) {
    // Programs that reopen their terminal by name (tty, ssh, sudo) need to own it.
    if (::fchown(pty.slave.get(), owner->uid, kTtyGid) != 0 ||
        ::fchmod(pty.slave.get(), 0620) != 0) {
      return base::ErrnoError(absl::StrCat("chown(", name, ")"));
    }
  }
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(pty.master.get()));
  return pty;
}

absl::StatusOr<base::UniqueFd> Dup(int fd) {
  base::UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!copy) {
    return base::ErrnoError("fcntl(F_DUPFD_CLOEXEC)");
  }
  return copy;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

SpawnSpec BuildSpawnSpec(const proto::ExecRequest& request, const Identity& identity,
                         bool switch_user) {
  SpawnSpec spec;
  if (request.shell) {
    spec.argv = {kShell, "-c", *request.shell};
  } else {
    spec.argv = request.argv;
  }
  std::map<std::string, std::string> env = {
      {"PATH", kDefaultPath},     {"HOME", identity.home},   {"USER", identity.name},
      {"LOGNAME", identity.name}, {"SHELL", identity.shell}, {"LANG", "C.UTF-8"},
  };
  // Tools that honour a proxy use the agent's HTTP proxy port (the host then sees the name they
  // asked for, not just an address); the rest are caught by the transparent redirect.
  for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) {
    env[name] = kGuestHttpProxy;
  }
  for (const char* name : {"NO_PROXY", "no_proxy"}) {
    env[name] = kGuestNoProxy;
  }
  if (request.pty) {
    env["TERM"] = "xterm-256color";
  }
  for (const auto& [name, value] : request.env) {
    env[name] = value;
  }
  spec.path = env["PATH"];
  for (const auto& [name, value] : env) {
    spec.env.push_back(absl::StrCat(name, "=", value));
  }
  if (request.cwd.empty()) {
    // A home that does not exist (a host without the agent user) is no reason to fail.
    spec.cwd = IsDirectory(identity.home) ? identity.home : "/";
  } else if (request.cwd[0] == '/') {
    spec.cwd = request.cwd;
  } else {
    spec.cwd = absl::StrCat(identity.home, identity.home == "/" ? "" : "/", request.cwd);
  }
  if (switch_user) {
    spec.switch_to = identity;
  }
  spec.stdin_pipe = request.stdin_open;
  spec.pty = request.pty;
  return spec;
}

base::ExitStatus FromWaitStatus(int wait_status) {
  base::ExitStatus s;
  if (WIFEXITED(wait_status)) {
    s.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    s.signal = WTERMSIG(wait_status);
  } else {
    s.exit_code = 255;
  }
  return s;
}

std::optional<base::ExitStatus> TryReapPidfd(int pidfd) {
  siginfo_t info{};
  int rc;
  do {
    rc = ::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 || info.si_pid == 0) {
    return std::nullopt;  // Still running, or already reaped by PID 1's reaper.
  }
  base::ExitStatus s;
  if (info.si_code == CLD_EXITED) {
    s.exit_code = info.si_status;
  } else {
    s.signal = info.si_status;
  }
  return s;
}

absl::StatusOr<SpawnedProcess> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) {
    return absl::InvalidArgumentError("spawn: empty argv");
  }
  // Everything the child touches is built here, before fork().
  std::vector<std::string> argv_storage = spec.argv;
  std::vector<std::string> env_storage = spec.env;
  std::vector<std::string> cand_storage = Candidates(spec.argv[0], spec.path);
  std::vector<char*> argv = CStrings(argv_storage);
  std::vector<char*> envp = CStrings(env_storage);
  std::vector<char*> candidates = CStrings(cand_storage);
  std::string sh_storage = kShell;
  std::vector<char*> sh_argv = {sh_storage.data(), nullptr};
  sh_argv.insert(sh_argv.end(), argv.begin() + 1, argv.end());  // includes the final nullptr
  std::vector<gid_t> groups = spec.switch_to ? spec.switch_to->groups : std::vector<gid_t>{};

  base::UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) {
    return base::ErrnoError("open(/dev/null)");
  }
  SpawnedProcess out;
  base::UniqueFd child_stdin, child_stdout, child_stderr;  // the child's ends, closed after fork
  ChildPlan plan;
  if (spec.pty) {
    ABOX_ASSIGN_OR_RETURN(Pty pty, OpenPty(*spec.pty, spec.switch_to));
    if (spec.stdin_pipe) {
      ABOX_ASSIGN_OR_RETURN(out.stdin_fd, Dup(pty.master.get()));
    }
    ABOX_ASSIGN_OR_RETURN(out.pty_master, Dup(pty.master.get()));
    out.stdout_fd = std::move(pty.master);
    plan.pty_slave = pty.slave.get();
    plan.stdio[0] = plan.stdio[1] = plan.stdio[2] = pty.slave.get();
    child_stdin = std::move(pty.slave);
  } else {
    if (spec.stdin_pipe) {
      ABOX_ASSIGN_OR_RETURN(base::Pipe in, base::MakePipe());
      ABOX_RETURN_IF_ERROR(base::SetNonBlocking(in.write.get()));
      child_stdin = std::move(in.read);
      out.stdin_fd = std::move(in.write);
      plan.stdio[0] = child_stdin.get();
    } else {
      plan.stdio[0] = devnull.get();
    }
    ABOX_ASSIGN_OR_RETURN(base::Pipe so, base::MakePipe(O_NONBLOCK));
    ABOX_ASSIGN_OR_RETURN(base::Pipe se, base::MakePipe(O_NONBLOCK));
    // O_NONBLOCK applies to both ends; the child's ends must block.
    ABOX_RETURN_IF_ERROR(base::SetNonBlocking(so.write.get(), false));
    ABOX_RETURN_IF_ERROR(base::SetNonBlocking(se.write.get(), false));
    child_stdout = std::move(so.write);
    child_stderr = std::move(se.write);
    out.stdout_fd = std::move(so.read);
    out.stderr_fd = std::move(se.read);
    plan.stdio[1] = child_stdout.get();
    plan.stdio[2] = child_stderr.get();
  }
  ABOX_ASSIGN_OR_RETURN(base::Pipe report, base::MakePipe());

  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.candidates = candidates.data();
  plan.n_candidates = cand_storage.size();
  plan.shell = sh_storage.c_str();
  plan.sh_argv = sh_argv.data();
  plan.cwd = spec.cwd.c_str();
  if (spec.switch_to) {
    plan.switch_user = true;
    plan.uid = spec.switch_to->uid;
    plan.gid = spec.switch_to->gid;
    plan.groups = groups.data();
    plan.n_groups = groups.size();
  }
  plan.report_fd = report.write.get();
  plan.cgroup_procs_fd = spec.cgroup_procs_fd;

  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) {
      plan.ignored[plan.n_ignored++] = sig;
    }
  }

  out.oom_counter_path = spec.oom_counter_path;
  out.oom_kill_counter = ReadOomKillCounter(spec.oom_counter_path);
  out.started = std::chrono::steady_clock::now();
  pid_t pid = SpawnChild(plan);
  if (pid < 0) {
    return base::ErrnoError("clone");
  }
  out.pid = pid;
  report.write.reset();
  child_stdin.reset();
  child_stdout.reset();
  child_stderr.reset();
  out.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!out.pidfd) {
    absl::Status error = base::ErrnoError("pidfd_open");
    ::kill(pid, SIGKILL);
    int ignored;
    while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
    return error;
  }
  // Blocks until the child execs (the pipe closes) or reports why it could not.
  ChildReport r;
  ssize_t n;
  do {
    n = ::read(report.read.get(), &r, sizeof(r));
  } while (n < 0 && errno == EINTR);
  if (n == sizeof(r)) {
    out.error = ErrorText(r, spec);
  }
  return out;
}

}  // namespace abox::guest
