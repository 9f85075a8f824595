#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <optional>
#include <set>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/base/fenced_remove.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/cli/output.h"
#include "src/cli/run_command.h"  // RunInFreshVm
#include "src/cli/terminal.h"
#include "src/cli/terminal_text.h"
#include "src/runtime/agent_guest_tools.h"
#include "src/workspace/run_copies.h"
#include "src/workspace/sync.h"

namespace abox::cli {
namespace {

// Our terminal's size for the guest's PTY.
std::optional<proto::PtySize> PtySize() {
  std::optional<WindowSize> size = TerminalSize();
  if (!size) {
    return std::nullopt;
  }
  return proto::PtySize{size->rows, size->cols};
}

// `abox run -w`: one sync into the fresh VM, from a throwaway state dir (no base is kept: the
// VM and its copy go away with the command). The copy is $ABOX_HOME/tmp/run-workspace-<id>/,
// beside run-workspace-<id>.lock, which this run holds while the copy exists: when the run is
// killed the kernel drops the lock and the next `abox run` removes the copy
// (CollectRunLeftovers).
absl::Status SyncOnce(runtime::Sandbox& sandbox, const workspace::Binding& binding) {
  ABOX_ASSIGN_OR_RETURN(workspace::Binding checked, workspace::ValidateBinding(binding));
  ABOX_ASSIGN_OR_RETURN(base::HostLayout paths, base::ResolveHostLayout());
  std::string dir = absl::StrCat(paths.home.string(), "/tmp");
  (void)::mkdir(dir.c_str(), 0700);
  dir = absl::StrCat(dir, "/", workspace::kRunCopyPrefix, sandbox.id());
  std::string lock_path = absl::StrCat(dir, workspace::kRunCopyLockSuffix);
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd lock, workspace::LockRunCopy(lock_path, /*wait=*/true));
  absl::Cleanup cleanup = [&] {
    if (absl::Status s = base::RemoveUnder(paths.home, dir); !s.ok()) {
      std::fprintf(stderr,
                   "abox: could not remove the workspace copy %s: %s (the next abox run "
                   "tries again)\n",
                   dir.c_str(), std::string(s.message()).c_str());
      return;  // the lock file stays, so the next run knows the copy is garbage
    }
    (void)base::RemoveFileUnder(paths.home, lock_path);
  };
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<workspace::WorkspaceState> state,
                        workspace::WorkspaceState::Create(dir, checked));
  runtime::AgentGuestTools tools(sandbox.agent());
  bool tty = ::isatty(STDERR_FILENO) != 0;
  ABOX_ASSIGN_OR_RETURN(
      workspace::SyncReport report,
      workspace::SyncIn(*state, tools, [&](absl::string_view phase, uint64_t done, uint64_t total) {
        if (tty && phase == "send" && total > (8 << 20)) {
          std::fprintf(stderr, "\rabox: syncing %s: %llu/%llu MiB", checked.host_root.c_str(),
                       static_cast<unsigned long long>(done >> 20),
                       static_cast<unsigned long long>(total >> 20));
        }
      }));
  if (tty && report.bytes > (8 << 20)) {
    std::fprintf(stderr, "\r\033[K");
  }
  for (const std::string& note : report.notes) {
    std::fprintf(stderr, "abox: workspace: %s\n", note.c_str());
  }
  if (!report.excluded.empty()) {
    std::fprintf(stderr, "abox: workspace: %zu secret-looking file(s) left out (e.g. %s)\n",
                 report.excluded.size(), report.excluded.front().c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int RunInFreshVm(const RunOptions& options) {
  // Block the signals we handle before any thread starts, so only sigwait() sees them.
  BlockHandledSignals();
  ::signal(SIGPIPE, SIG_IGN);

  // What killed runs left behind (their lock is gone with them).
  if (absl::StatusOr<base::HostLayout> paths = base::ResolveHostLayout(); paths.ok()) {
    if (absl::StatusOr<int> removed = workspace::CollectRunLeftovers(paths->home); !removed.ok()) {
      std::fprintf(stderr,
                   "abox: warning: cannot remove the workspace copy of a killed run: %s (remove "
                   "it by hand under %s/tmp)\n",
                   std::string(removed.status().message()).c_str(), paths->home.c_str());
    }
  }

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
  if (options.workspace) {
    if (absl::Status s = SyncOnce(sb, *options.workspace); !s.ok()) {
      PrintError(s);
      (void)sb.Destroy();
      return kExitAboxFailure;
    }
  }

  proto::ExecRequest request;
  request.argv = options.argv;
  request.env = options.env;
  request.cwd = options.workdir;
  if (request.cwd.empty() && options.workspace) {
    request.cwd = options.workspace->guest_path;
  }
  request.user = options.root ? "root" : "";
  request.timeout_ms = static_cast<uint64_t>(options.timeout_seconds * 1000);
  request.stdin_open = options.forward_stdin;
  if (options.tty) {
    request.pty = PtySize().value_or(proto::PtySize{});
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
  SignalForwarder signals({
      .on_signal =
          [&](int sig, int count) {
            if (count == 1) {
              exec->Signal(sig);
              return true;
            }
            interrupted = true;
            std::fprintf(stderr, "\nabox: interrupted again: stopping the VM\n");
            sb.agent().Fail(absl::CancelledError("interrupted"));
            return false;
          },
      .on_resize =
          [&] {
            if (auto size = PtySize(); size && options.tty) {
              exec->Resize(*size);
            }
          },
  });

  std::optional<RawTerminal> raw;
  if (options.tty) {
    raw.emplace();
  }
  base::UniqueFd stop_stdin(::eventfd(0, EFD_CLOEXEC));
  std::thread stdin_thread;
  if (options.forward_stdin) {
    stdin_thread = std::thread([&exec, &stop_stdin] {
      ForwardStdin(
          stop_stdin.get(),
          [&exec](std::string_view data) {
            return exec->WriteStdin(absl::string_view(data.data(), data.size())).ok();
          },
          [&exec] { exec->CloseStdin(); });
    });
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
  signals.Stop();
  raw.reset();

  int code;
  if (interrupted) {
    code = kExitInterrupted;
  } else if (!result.ok()) {
    std::fprintf(stderr, "abox: the sandbox failed while running the command: %s\n",
                 ForTerminal(stderr, sb.FailureReport()).c_str());
    code = kExitAboxFailure;
  } else {
    code = PrintExitReport(ReportCommandEnd(
        {.exit_code = result->exit_code,
         .signal = result->signal,
         .timed_out = result->timed_out,
         .error = result->error,
         .timeout_seconds = options.timeout_seconds,
         .oom_kills = result->oom_kills,
         .memory = {.memory_mib = options.sandbox.memory_mib, .command = "abox run"}}));
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
