#include "src/client/daemon_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "src/base/child_process.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/base/self_path.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/client/socket_trust.h"

extern char** environ;

namespace abox::client {
namespace {

// One health probe waits at most this long for an answer (a daemon that accepted the
// connection but is not serving yet keeps us waiting in its backlog).
constexpr absl::Duration kProbeTimeout = absl::Seconds(5);
constexpr int kLogTailLines = 10;

void Sleep(absl::Duration d) { std::this_thread::sleep_for(absl::ToChronoMilliseconds(d)); }

// A client for one health probe, bounded by `timeout`.
absl::StatusOr<api::Health> ProbeHealth(const std::string& socket_path, absl::Duration timeout) {
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<ApiClient> client, ApiClient::Create(socket_path));
  client->set_timeout(timeout);
  return CheckHealth(*client);
}

// "\nIts log (<path>) ends with:\n  <lines>" or a note that it logged nothing.
std::string LogReport(const std::string& log_path, off_t offset) {
  std::string tail = LogTail(log_path, offset, kLogTailLines);
  if (tail.empty()) {
    return absl::StrCat("; it logged nothing to ", log_path);
  }
  return absl::StrCat(". Its log (", log_path, ") ends with:\n", tail);
}

// fork + exec of aboxd, detached: its own session (no controlling terminal, so a Ctrl-C in the
// terminal that started it does not reach it), stdin /dev/null, stdout and stderr to `log_fd`.
// Not base::ChildProcess: that one kills its child when it goes away, and this child must
// outlive us. Between fork and exec only async-signal-safe calls run.
absl::StatusOr<pid_t> SpawnDetached(const std::vector<std::string>& argv, int log_fd) {
  base::UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) {
    return base::ErrnoError("open(/dev/null)");
  }
  ABOX_ASSIGN_OR_RETURN(base::Pipe err_pipe, base::MakePipe());
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    return base::ErrnoError("fork");
  }
  if (pid == 0) {
    int step = 0;
    if (::setsid() < 0) {
      step = 1;
    } else {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig = 1; sig < NSIG; ++sig) {
        ::sigaction(sig, &dfl, nullptr);  // abox ignores SIGPIPE; the daemon starts clean
      }
      sigset_t none;
      ::sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);  // NOLINT(concurrency-mt-unsafe): one thread
      if (::dup2(devnull.get(), 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) {
        step = 2;
      } else {
        ::execve(args[0], args.data(), environ);
        step = 3;
      }
    }
    int payload[2] = {step, errno};
    (void)!::write(err_pipe.write.get(), payload, sizeof(payload));
    ::_exit(127);
  }
  err_pipe.write.reset();
  int payload[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(err_pipe.read.get(), payload, sizeof(payload));
  } while (n < 0 && errno == EINTR);
  if (n == sizeof(payload)) {
    int wstatus = 0;
    (void)::waitpid(pid, &wstatus, 0);
    static constexpr const char* kSteps[] = {"", "setsid", "dup2", "execve"};
    return base::ErrnoError(absl::StrCat(kSteps[payload[0] & 3], "(", argv[0], ")"), payload[1]);
  }
  return pid;
}

// Whether a daemon holds the socket's lock. One that has just taken it may not have written
// its pid yet (RunningDaemonPid: kDataLoss): it holds it all the same.
bool LockIsHeld(const std::string& socket_path) {
  absl::StatusOr<pid_t> pid = RunningDaemonPid(socket_path);
  return pid.ok() || absl::IsDataLoss(pid.status());
}

}  // namespace

absl::StatusOr<DaemonOptions> DaemonOptionsFromEnv() {
  DaemonOptions options;
  ABOX_ASSIGN_OR_RETURN(std::filesystem::path socket, base::ResolveSocketPath());
  ABOX_ASSIGN_OR_RETURN(base::HostLayout paths, base::ResolveHostLayout());
  options.socket_path = socket.string();
  options.log_path = (paths.home / "logs" / "aboxd.log").string();
  const char* no_autostart = std::getenv("ABOX_NO_AUTOSTART");  // NOLINT(concurrency-mt-unsafe)
  options.autostart = no_autostart == nullptr || std::string(no_autostart) != "1";
  return options;
}

absl::StatusOr<std::string> FindAboxd(const DaemonOptions& options) {
  if (!options.aboxd_binary.empty()) {
    if (::access(options.aboxd_binary.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat(options.aboxd_binary, " is not an executable"));
    }
    return options.aboxd_binary;
  }
  return base::FindCompanionBinary("aboxd", "ABOXD_BIN");
}

std::vector<std::string> AboxdArgv(const std::string& binary, const DaemonOptions& options) {
  std::vector<std::string> argv = {binary, "--socket", options.socket_path};
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  return argv;
}

absl::StatusOr<api::Health> CheckHealth(ApiClient& client) {
  ABOX_ASSIGN_OR_RETURN(ApiResponse health, client.Get("/v1/health"));
  absl::StatusOr<api::Health> decoded = api::DecodeHealth(health.json);
  if (!decoded.ok() || decoded->status != "ok") {
    return absl::UnavailableError(
        absl::StrCat("something answers on ", client.socket_path(),
                     " but not as a healthy aboxd (GET /v1/health: ", health.body.substr(0, 200),
                     "); stop it or set ABOX_SOCKET to another path"));
  }
  return *std::move(decoded);
}

absl::StatusOr<std::unique_ptr<ApiClient>> ConnectOrStartDaemon(const DaemonOptions& options) {
  absl::StatusOr<api::Health> health = ProbeHealth(options.socket_path, kProbeTimeout);
  if (!health.ok() && IsNothingListening(health.status())) {
    if (!options.autostart) {
      return absl::UnavailableError(absl::StrCat(
          "aboxd is not running (nothing listens on ", options.socket_path,
          "); run `abox daemon start` (ABOX_NO_AUTOSTART=1 keeps abox from starting it)"));
    }
    absl::StatusOr<pid_t> started = StartDaemon(options);
    if (!started.ok() && started.status().code() != absl::StatusCode::kAlreadyExists) {
      return started.status();  // kAlreadyExists: another client started it meanwhile
    }
  } else if (!health.ok()) {
    return health.status();
  }
  return ApiClient::Create(options.socket_path);
}

absl::StatusOr<pid_t> StartDaemon(const DaemonOptions& options) {
  absl::StatusOr<api::Health> health = ProbeHealth(options.socket_path, kProbeTimeout);
  if (health.ok()) {
    absl::StatusOr<pid_t> pid = RunningDaemonPid(options.socket_path);
    return absl::AlreadyExistsError(absl::StrCat("aboxd is already running",
                                                 pid.ok() ? absl::StrCat(" (pid ", *pid, ")") : "",
                                                 " on ", options.socket_path));
  }
  if (!IsNothingListening(health.status())) {
    return health.status();
  }
  ABOX_ASSIGN_OR_RETURN(std::string binary, FindAboxd(options));
  std::error_code ec;
  std::filesystem::path log_dir = std::filesystem::path(options.log_path).parent_path();
  std::filesystem::create_directories(log_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", log_dir.string(), ": ", ec.message(), "; check ABOX_HOME"));
  }
  base::UniqueFd log(
      ::open(options.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
  if (!log) {
    return base::ErrnoError(absl::StrCat("open(", options.log_path, ")"));
  }
  off_t offset = ::lseek(log.get(), 0, SEEK_END);
  std::vector<std::string> argv = AboxdArgv(binary, options);
  ABOX_ASSIGN_OR_RETURN(pid_t pid, SpawnDetached(argv, log.get()));
  log.reset();

  absl::Time deadline = absl::Now() + options.start_timeout;
  std::optional<base::ExitStatus> exited;
  absl::Status last = health.status();
  for (;;) {
    if (!exited) {
      exited = base::TryReap(pid);
    }
    absl::Duration left = deadline - absl::Now();
    health = ProbeHealth(options.socket_path,
                         std::max(std::min(left, kProbeTimeout), absl::Milliseconds(100)));
    if (health.ok()) {
      // A daemon answers. If ours exited (non-zero), another start won the race for the lock.
      return exited ? RunningDaemonPid(options.socket_path).value_or(pid) : pid;
    }
    last = health.status();
    // Ours failed. If another daemon holds the lock (a concurrent start won the race: aboxd
    // takes the lock before anything else, so a loser exits at once with "another aboxd
    // already serves"), wait for that one to answer instead.
    if (exited && exited->ShellCode() != 0 && !LockIsHeld(options.socket_path)) {
      return absl::UnavailableError(absl::StrCat(
          "aboxd (", binary, ") exited with ", exited->ToString(), " before it answered on ",
          options.socket_path, LogReport(options.log_path, offset)));
    }
    // An aboxd that exited 0 may have forked into the background: keep asking until the deadline.
    if (absl::Now() >= deadline) {
      std::string state =
          exited ? absl::StrCat("aboxd exited with ", exited->ToString(), " and nothing answers")
                 : absl::StrCat("aboxd (pid ", pid, ") is running but did not answer");
      return absl::DeadlineExceededError(absl::StrCat(
          state, " on ", options.socket_path, " within ",
          absl::FormatDuration(options.start_timeout), " (last try: ", last.message(), ")",
          LogReport(options.log_path, offset),
          exited ? "" : absl::StrCat("\nStop it with `kill ", pid, "` and try again.")));
    }
    Sleep(options.poll_interval);
  }
}

absl::StatusOr<pid_t> RunningDaemonPid(const std::string& socket_path) {
  std::string lock_path = socket_path + ".lock";
  base::UniqueFd fd(::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("aboxd is not running (no ", lock_path, ")"));
    }
    return base::ErrnoError(absl::StrCat("open(", lock_path, ")"));
  }
  int r;
  do {
    r = ::flock(fd.get(), LOCK_SH | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  if (r == 0) {
    // Nobody holds it: no daemon serves this socket. Let go at once, so that a daemon starting
    // right now is not refused.
    (void)::flock(fd.get(), LOCK_UN);
    return absl::NotFoundError(
        absl::StrCat("aboxd is not running (nothing holds ", lock_path, ")"));
  }
  if (errno != EWOULDBLOCK) {
    return base::ErrnoError(absl::StrCat("flock(", lock_path, ")"));
  }
  char buf[32] = {};
  ssize_t n = ::pread(fd.get(), buf, sizeof(buf) - 1, 0);
  int pid = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buf, n)), &pid) ||
      pid <= 0) {
    return absl::DataLossError(absl::StrCat(
        "aboxd holds ", lock_path, " but the file has no pid in it; find the process with `fuser ",
        lock_path, "`"));
  }
  return static_cast<pid_t>(pid);
}

absl::StatusOr<pid_t> VerifiedDaemonPid(const DaemonOptions& options) {
  PeerCredentials peer;
  absl::StatusOr<base::UniqueFd> connected =
      ConnectToOwnServer(options.socket_path, absl::Now() + kProbeTimeout, &peer);
  if (!connected.ok() && IsNothingListening(connected.status())) {
    absl::StatusOr<pid_t> locked = RunningDaemonPid(options.socket_path);
    if (!locked.ok()) {
      return locked.status();  // kNotFound: no daemon
    }
    // The pid in the lock file alone is not enough to signal: a file says what anybody wrote.
    return absl::FailedPreconditionError(absl::StrCat(
        "something (pid ", *locked, " by ", options.socket_path,
        ".lock) holds aboxd's lock but nothing listens on ", options.socket_path,
        ": it may be starting, or stuck; abox signals only the process that serves the socket. "
        "Check it with `ps -p ",
        *locked, " -o pid,user,args` and stop it yourself if it is your aboxd"));
  }
  if (!connected.ok()) {
    return connected.status();  // e.g. another user's server, which is refused
  }
  absl::StatusOr<std::string> binary = FindAboxd(options);
  ABOX_RETURN_IF_ERROR(
      VerifyAboxdProcess(peer.pid, ::geteuid(), binary.ok() ? *binary : std::string()));
  return peer.pid;
}

absl::StatusOr<pid_t> StopDaemon(const DaemonOptions& options) {
  ABOX_ASSIGN_OR_RETURN(pid_t pid, VerifiedDaemonPid(options));
  // By pidfd, checked once more after it is open: the pid cannot be reused by another process
  // between the check and the signal.
  base::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) {
    if (errno == ESRCH) {
      return pid;  // it exited by itself meanwhile
    }
    return base::ErrnoError(absl::StrCat("pidfd_open(aboxd pid ", pid, ")"));
  }
  absl::StatusOr<std::string> binary = FindAboxd(options);
  if (absl::Status s = VerifyAboxdProcess(pid, ::geteuid(), binary.ok() ? *binary : std::string());
      !s.ok() && s.code() != absl::StatusCode::kNotFound) {
    return s;
  }
  if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGTERM, nullptr, 0) != 0 && errno != ESRCH) {
    return base::ErrnoError(absl::StrCat("pidfd_send_signal(aboxd pid ", pid, ", SIGTERM)"));
  }
  absl::Time deadline = absl::Now() + options.stop_timeout;
  for (;;) {
    absl::StatusOr<pid_t> still = RunningDaemonPid(options.socket_path);
    if (!still.ok() && still.status().code() == absl::StatusCode::kNotFound) {
      absl::StatusOr<api::Health> health =
          ProbeHealth(options.socket_path, absl::Milliseconds(500));
      if (!health.ok() && IsNothingListening(health.status())) {
        return pid;
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "aboxd (pid ", pid, ") is still running ", absl::FormatDuration(options.stop_timeout),
          " after SIGTERM (it finishes the requests under way first; its sandboxes keep running "
          "either way); see ",
          options.log_path, ", or force it with `kill -KILL ", pid, "`"));
    }
    Sleep(options.poll_interval);
  }
}

std::string LogTail(const std::string& path, off_t offset, int max_lines) {
  constexpr off_t kMaxTailBytes = 64 << 10;
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return "";
  }
  off_t end = ::lseek(fd.get(), 0, SEEK_END);
  off_t start = std::max(offset, end - kMaxTailBytes);
  if (end <= start) {
    return "";
  }
  std::string text(static_cast<size_t>(end - start), '\0');
  ssize_t n = ::pread(fd.get(), text.data(), text.size(), start);
  if (n <= 0) {
    return "";
  }
  text.resize(static_cast<size_t>(n));
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  if (lines.size() > static_cast<size_t>(max_lines)) {
    lines.erase(lines.begin(), lines.end() - max_lines);
  }
  std::string out;
  for (absl::string_view line : lines) {
    absl::StrAppend(&out, out.empty() ? "" : "\n", "  ", absl::StripTrailingAsciiWhitespace(line));
  }
  return out;
}

}  // namespace abox::client
