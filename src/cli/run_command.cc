#include "src/cli/run_command.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/cli/output.h"

namespace abox::cli {
namespace {

// Signals the run handles itself (on a dedicated thread, blocked everywhere else).
sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH}) {
    sigaddset(&set, sig);
  }
  return set;
}

// Forwards our stdin to the command until EOF or until told to stop (through `stop_fd`).
void PumpStdin(runtime::Exec* exec, int stop_fd) {
  char buf[64 * 1024];
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (fds[1].revents != 0) {
      return;
    }
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    if (!exec->WriteStdin(absl::string_view(buf, static_cast<size_t>(n))).ok()) {
      return;
    }
  }
  exec->CloseStdin();
}

std::optional<proto::PtySize> TerminalSize() {
  winsize ws{};
  if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) {
    return std::nullopt;
  }
  return proto::PtySize{ws.ws_row, ws.ws_col};
}

// Puts our terminal in raw mode for the lifetime of the object (keys go to the guest's PTY,
// whose line discipline echoes and interprets them), restoring it afterwards.
class RawTerminal final {
 public:
  RawTerminal() {
    if (::isatty(STDIN_FILENO) && ::tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      ::cfmakeraw(&raw);
      active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
  }
  ~RawTerminal() {
    if (active_) {
      ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    }
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

}  // namespace

int RunInFreshVm(const RunOptions& options) {
  // Block the signals we handle before any thread starts, so only sigwait() sees them.
  sigset_t handled = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto vmm = runtime::CreateDefaultVmm();
  if (!vmm.ok()) {
    PrintError(vmm.status());
    return kExitAboxFailure;
  }
  auto sandbox = runtime::Sandbox::Boot(**vmm, options.sandbox, [](const std::string& line) {
    std::fprintf(stderr, "abox: %s\n", line.c_str());
  });
  if (!sandbox.ok()) {
    PrintError(sandbox.status());
    return kExitAboxFailure;
  }
  runtime::Sandbox& sb = **sandbox;

  proto::ExecRequest request;
  request.argv = options.argv;
  request.env = options.env;
  request.cwd = options.workdir;
  request.user = options.root ? "root" : "";
  request.timeout_ms = static_cast<uint64_t>(options.timeout_seconds * 1000);
  request.stdin_open = options.forward_stdin;
  if (options.tty) {
    request.pty = TerminalSize().value_or(proto::PtySize{});
    request.env.emplace("TERM", "xterm-256color");
    if (const char* term = std::getenv("TERM")) {  // NOLINT(concurrency-mt-unsafe)
      request.env["TERM"] = term;
    }
  }
  auto exec_or = sb.agent().StartExec(request);
  if (!exec_or.ok()) {
    PrintError(exec_or.status());
    (void)sb.Destroy();
    return kExitAboxFailure;
  }
  std::unique_ptr<runtime::Exec> exec = std::move(*exec_or);

  // Signals: the first SIGINT/SIGTERM/SIGHUP/SIGQUIT goes to the command; a second one of the
  // same kind tears the VM down. SIGWINCH resizes the guest's PTY. With -t on a terminal, Ctrl-C
  // is a byte for the guest's PTY (raw mode), so it reaches the command through the PTY.
  std::atomic<bool> interrupted{false};
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    int count[65] = {};
    for (;;) {
      int sig = 0;
      if (sigwait(&handled, &sig) != 0 || done) {
        return;
      }
      if (sig == SIGWINCH) {
        if (auto size = TerminalSize(); size && options.tty) {
          exec->Resize(*size);
        }
        continue;
      }
      if (++count[sig] == 1) {
        exec->Signal(sig);
        continue;
      }
      interrupted = true;
      std::fprintf(stderr, "\nabox: interrupted again: stopping the VM\n");
      sb.agent().Fail(absl::CancelledError("interrupted"));
      return;
    }
  });

  std::optional<RawTerminal> raw;
  if (options.tty) {
    raw.emplace();
  }
  base::UniqueFd stop_stdin(::eventfd(0, EFD_CLOEXEC));
  std::thread stdin_thread;
  if (options.forward_stdin) {
    stdin_thread = std::thread(PumpStdin, exec.get(), stop_stdin.get());
  }

  bool stdout_broken = false;
  while (auto chunk = exec->ReadOutput()) {
    int fd = chunk->is_stderr ? STDERR_FILENO : STDOUT_FILENO;
    if (fd == STDOUT_FILENO && stdout_broken) {
      continue;
    }
    if (!base::WriteAll(fd, chunk->data).ok() && fd == STDOUT_FILENO) {
      // Like a local pipeline (`abox run -- yes | head`): the command gets SIGPIPE.
      stdout_broken = true;
      exec->Signal(SIGPIPE);
    }
  }
  auto result = exec->Wait();

  uint64_t one = 1;
  (void)!::write(stop_stdin.get(), &one, sizeof(one));
  if (stdin_thread.joinable()) {
    stdin_thread.join();
  }
  done = true;
  ::pthread_kill(signal_thread.native_handle(), SIGINT);
  signal_thread.join();
  raw.reset();

  int code;
  if (interrupted) {
    code = kExitInterrupted;
  } else if (!result.ok()) {
    std::fprintf(stderr, "abox: the sandbox failed while running the command: %s\n",
                 sb.FailureReport().c_str());
    code = kExitAboxFailure;
  } else {
    if (!result->error.empty()) {
      std::fprintf(stderr, "abox: %s\n", result->error.c_str());
    }
    if (result->timed_out) {
      std::fprintf(stderr, "abox: the command timed out after %gs and was killed\n",
                   options.timeout_seconds);
      code = kExitTimeout;
    } else {
      code = result->ShellCode();
    }
  }
  exec.reset();
  if (auto s = sb.Destroy(); !s.ok()) {
    PrintError(s);
    if (code == 0) {
      code = kExitAboxFailure;
    }
  }
  return code;
}

}  // namespace abox::cli
