#include "src/cli/exec_command.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/api/exec.h"
#include "src/api/sandbox.h"
#include "src/base/io.h"
#include "src/base/utf8.h"
#include "src/cli/exit_status.h"
#include "src/cli/flags.h"
#include "src/cli/sandbox_format.h"
#include "src/cli/terminal.h"
#include "src/cli/usage_errors.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

// `abox shell`: a login bash where the image has one, else a login sh. (Not `exec bash -l ||
// exec sh -l`: a failed `exec` ends a non-interactive shell before the fallback runs.)
constexpr char kShellScript[] =
    "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l";

struct ExecOptions {
  std::string sandbox;
  std::vector<std::string> argv;
  std::vector<std::string> env_items;
  std::string workdir;
  bool no_sync = false;
  bool root = false;
  bool tty = false;
  bool no_stdin = false;
  double timeout_seconds = 0;
};

absl::StatusOr<api::ExecCreate> ExecRequestBody(const ExecOptions& o) {
  absl::StatusOr<std::map<std::string, std::string>> env =
      ParseKeyValues("-e/--env", "NAME=VALUE", o.env_items);
  if (!env.ok()) {
    return env.status();
  }
  if (o.tty) {
    const char* term = std::getenv("TERM");  // NOLINT(concurrency-mt-unsafe)
    env->emplace("TERM", term != nullptr && *term != '\0' ? term : "xterm-256color");
  }
  std::vector<std::string_view> texts(o.argv.begin(), o.argv.end());
  for (const auto& [key, value] : *env) {
    texts.push_back(key);
    texts.push_back(value);
  }
  texts.push_back(o.workdir);
  for (std::string_view text : texts) {
    if (!base::IsValidUtf8(absl::string_view(text.data(), text.size()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", std::string(text),
                       "' is not valid UTF-8, which the API cannot carry; pass "
                       "binary data through stdin instead"));
    }
  }
  api::ExecCreate body;
  body.argv = o.argv;
  body.stdin_open = !o.no_stdin;
  body.kill_on_disconnect = true;
  body.env = *std::move(env);
  body.cwd = o.workdir;
  body.sync = !o.no_sync;
  if (o.root) {
    body.user = "root";
  }
  if (o.timeout_seconds > 0) {
    body.timeout_ms = static_cast<int64_t>(o.timeout_seconds * 1000);
  }
  if (o.tty) {
    WindowSize size = TerminalSize().value_or(WindowSize{24, 80});
    body.pty = std::make_pair(int64_t{size.rows}, int64_t{size.cols});
  }
  return body;
}

// A client for short control requests (signal, resize) from several threads.
class ControlChannel final {
 public:
  ControlChannel(std::unique_ptr<client::ApiClient> api, std::string exec_path)
      : api_(std::move(api)), exec_path_(std::move(exec_path)) {}

  void Signal(int sig) { Post("/signal", api::SignalRequestToJson(SignalName(sig))); }
  void Resize(WindowSize size) { Post("/resize", api::PtySizeToJson(size.rows, size.cols)); }

 private:
  void Post(absl::string_view what, const nlohmann::json& body) {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<client::ApiResponse> r = api_->Post(absl::StrCat(exec_path_, what), body);
    // The command may have just ended (409): nothing left to signal. Anything else is worth a
    // line, but not the end of the session.
    if (!r.ok() && r.status().code() != absl::StatusCode::kFailedPrecondition) {
      std::fprintf(stderr, "abox: %s\n", std::string(r.status().message()).c_str());
    }
  }

  std::mutex mu_;
  std::unique_ptr<client::ApiClient> api_;
  std::string exec_path_;
};

// The memory of `sandbox` for an out-of-memory message; 0 when it cannot be had (the message
// then goes without it: it is no reason to fail).
int64_t SandboxMemoryMib(client::ApiClient& api, const std::string& sandbox) {
  absl::StatusOr<client::ApiResponse> got = api.Get(client::SandboxPath(sandbox));
  if (!got.ok()) {
    return 0;
  }
  absl::StatusOr<api::Sandbox> decoded =
      client::DecodeAnswer(*got, "GET /v1/sandboxes/{id}", api::DecodeSandbox);
  return decoded.ok() ? decoded->memory_mib : 0;
}

// Feeds our stdin to the exec's stdin until EOF (then closes it there) or until stopped.
void PumpStdin(client::ApiClient& api, const std::string& exec_path, int stop_fd) {
  std::string target = absl::StrCat(exec_path, "/stdin");
  auto failed = [](const absl::Status& s) {
    // Ended, gone or cancelled: the command no longer reads. Anything else is worth a line.
    if (s.code() != absl::StatusCode::kFailedPrecondition &&
        s.code() != absl::StatusCode::kNotFound && s.code() != absl::StatusCode::kCancelled) {
      std::fprintf(stderr, "abox: forwarding stdin: %s\n", std::string(s.message()).c_str());
    }
  };
  ForwardStdin(
      stop_fd,
      [&](std::string_view data) {
        absl::Status s =
            api.PostBytes(target, absl::string_view(data.data(), data.size())).status();
        if (!s.ok()) {
          failed(s);
        }
        return s.ok();
      },
      [&] {
        absl::Status s = api.PostBytes(client::WithQuery(target, {{"eof", "true"}}), "").status();
        if (!s.ok()) {
          failed(s);
        }
      });
}

int Exec(const ExecOptions& o) {
  absl::StatusOr<api::ExecCreate> body = ExecRequestBody(o);
  if (!body.ok()) {
    return Fail(body.status(), kExitAboxFailure);
  }
  ::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<client::ApiClient>> output = ConnectToDaemon();
  if (!output.ok()) {
    return Fail(output.status(), kExitAboxFailure);
  }
  // From here on signals are the command's: a Ctrl-C while it starts reaches it once it runs.
  // (Before, Ctrl-C just ends abox: a daemon being started carries on in the background.)
  // Blocked before any thread starts, so that only the SignalForwarder sees them.
  BlockHandledSignals();
  return RelayExec(**output, o.sandbox, *body);
}

}  // namespace

int RelayExec(client::ApiClient& output_api, const std::string& sandbox,
              const api::ExecCreate& body, const std::string& memory_command) {
  client::ApiClient* output = &output_api;
  const bool tty = body.pty.has_value();
  absl::StatusOr<client::ApiResponse> started =
      output->Post(client::SandboxPath(sandbox, "/execs"), api::ToJson(body));
  if (!started.ok()) {
    return Fail(started.status(), kExitAboxFailure);
  }
  absl::StatusOr<api::Exec> exec =
      client::DecodeAnswer(*started, "POST /v1/sandboxes/{id}/execs", api::DecodeExec);
  if (!exec.ok()) {
    return Fail(exec.status(), kExitAboxFailure);
  }
  std::string exec_path =
      client::ExecPath(exec->sandbox_id.empty() ? sandbox : exec->sandbox_id, exec->id);
  absl::StatusOr<std::unique_ptr<client::ApiClient>> input =
      client::ApiClient::Create(output->socket_path());
  absl::StatusOr<std::unique_ptr<client::ApiClient>> control_api =
      client::ApiClient::Create(output->socket_path());
  if (!input.ok() || !control_api.ok()) {
    return Fail(input.ok() ? control_api.status() : input.status(), kExitAboxFailure);
  }
  ControlChannel control(*std::move(control_api), exec_path);

  // The first SIGINT/SIGTERM/SIGHUP/SIGQUIT goes to the command; a second one of the same kind
  // leaves, and the daemon kills the command once its last reader is gone (kill_on_disconnect).
  // With -t on a terminal, Ctrl-C is a byte for the remote PTY (raw mode) instead.
  std::atomic<bool> interrupted{false};
  SignalForwarder signals({
      .on_signal =
          [&](int sig, int count) {
            if (count == 1) {
              control.Signal(sig);
              return true;
            }
            interrupted = true;
            std::fprintf(stderr, "\nabox: interrupted again: leaving (aboxd stops the command)\n");
            output->Cancel();
            return false;
          },
      .on_resize =
          [&] {
            if (std::optional<WindowSize> size = TerminalSize(); size && tty) {
              control.Resize(*size);
            }
          },
  });
  std::optional<RawTerminal> raw;
  if (tty && body.stdin_open) {  // without stdin, keys must keep working locally (Ctrl-C)
    raw.emplace();
  }
  base::UniqueFd stop_stdin(::eventfd(0, EFD_CLOEXEC));
  std::thread stdin_thread;
  if (body.stdin_open) {
    stdin_thread = std::thread(PumpStdin, std::ref(**input), exec_path, stop_stdin.get());
  }

  std::optional<api::Exec> ended;
  absl::Status undecodable;
  bool stdout_broken = false;
  absl::Status streamed =
      output->StreamNdjson(absl::StrCat(exec_path, "/output"), [&](const nlohmann::json& json) {
        absl::StatusOr<api::OutputLine> line = api::DecodeOutputLine(json);
        if (!line.ok()) {
          undecodable = client::AnswerError(line.status(), "GET .../output");
          return false;
        }
        if (line->type == api::OutputLine::Type::kExit) {
          ended = std::move(line->exec);
          return false;
        }
        if (line->type == api::OutputLine::Type::kTruncated) {
          std::fprintf(stderr,
                       "abox: earlier output of the command was dropped before it could "
                       "be shown\n");
          return true;
        }
        int fd = line->chunk.stream == "stderr" ? STDERR_FILENO : STDOUT_FILENO;
        if (line->type != api::OutputLine::Type::kOutput ||
            (fd == STDOUT_FILENO && stdout_broken)) {
          return true;
        }
        if (!base::WriteAll(fd, line->chunk.data).ok() && fd == STDOUT_FILENO) {
          // Like a local pipeline (`abox exec ID -- yes | head`): the command gets SIGPIPE.
          stdout_broken = true;
          control.Signal(SIGPIPE);
        }
        return true;
      });

  uint64_t one = 1;
  (void)!::write(stop_stdin.get(), &one, sizeof(one));
  (*input)->Cancel();  // a stdin POST may be waiting for the guest's credit
  if (stdin_thread.joinable()) {
    stdin_thread.join();
  }
  signals.Stop();
  raw.reset();

  if (interrupted) {
    return kExitInterrupted;
  }
  if (!ended) {
    if (!undecodable.ok()) {
      streamed = undecodable;
    } else if (streamed.ok()) {
      streamed = absl::UnavailableError(
          "aboxd ended the command's output stream before the command finished; see "
          "`abox logs --execs`");
    }
    return Fail(streamed, kExitAboxFailure);
  }
  SandboxMemory memory{.command = memory_command};
  if (ended->oom_kills > 0) {
    memory.memory_mib =
        SandboxMemoryMib(*output, ended->sandbox_id.empty() ? sandbox : ended->sandbox_id);
  }
  return PrintExitReport(ReportExecEnd(*ended, memory));
}

namespace {

void AddCommonOptions(CLI::App* cmd, ExecOptions* o) {
  cmd->add_option("-e,--env", o->env_items, "Set an environment variable (NAME=VALUE, repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--workdir", o->workdir,
                  "Working directory inside the guest (default: the workspace when one is "
                  "bound, else the user's home)");
  cmd->add_flag("--no-sync", o->no_sync,
                "Do not sync the bound workspace in first (it is synced before every command "
                "by default)");
  cmd->add_flag("--root", o->root,
                "Run as root in the guest (default: the unprivileged user 'agent')");
}

}  // namespace

void AddExecCommands(CLI::App& app, Action* action, const std::vector<std::string>* tail,
                     const bool* has_tail) {
  auto exec = std::make_shared<ExecOptions>();
  auto* exec_cmd = app.add_subcommand(
      "exec",
      "Run a command in a sandbox created with `abox create`, like `abox run` does in a "
      "fresh one");
  exec_cmd->add_option("id", exec->sandbox, "Sandbox id, name or unique id prefix")->required();
  AddCommonOptions(exec_cmd, exec.get());
  exec_cmd->add_flag("-t,--tty", exec->tty,
                     "Give the command a terminal (PTY; stdout and stderr merged; our terminal "
                     "goes raw and its size follows), e.g. abox exec -t ID -- bash");
  exec_cmd->add_flag("--no-stdin", exec->no_stdin, "Give the command /dev/null as stdin");
  exec_cmd
      ->add_option("--timeout", exec->timeout_seconds,
                   "Kill the command (its whole process group) after S seconds")
      ->check(CLI::Range(0.001, 31536000.0));
  // Everything after the id (or after --) is the command. No allow_extras(): an unknown flag
  // before the command is refused (CheckCommandStart), not dropped.
  exec_cmd->prefix_command();
  exec_cmd->footer(
      R"(Exit status: the command's own exit code, 128+N when it was killed by signal N,
124 when --timeout killed it, 125 when abox, aboxd or the sandbox failed (or the
command was interrupted by the sandbox stopping), 126/127 when the command could not be
run or was not found, and 130 when a second Ctrl-C gave up on it. When the guest's OOM
killer ended the command (137) or some of its processes, a line on stderr says so.
Ctrl-C (and SIGTERM/SIGHUP/SIGQUIT) is forwarded to the command; a second one leaves, and
aboxd kills the command. The sandbox keeps running: remove it with `abox rm -f ID`.

Example: abox exec -e FOO=bar web -- sh -c 'echo $FOO; uname -r')");
  exec_cmd->callback([exec, exec_cmd, action, tail, has_tail] {
    *action = [exec, exec_cmd, tail, has_tail] {
      std::vector<std::string> words = exec_cmd->remaining();
      if (absl::Status s = CheckCommandStart(*exec_cmd, words); !s.ok()) {
        return Fail(s, 2);
      }
      exec->argv = CommandLine(std::move(words), *has_tail, *tail);
      if (exec->argv.empty()) {
        std::fprintf(stderr,
                     "abox: error: abox exec needs a command, e.g. abox exec %s -- uname "
                     "-a\n",
                     exec->sandbox.c_str());
        return 2;
      }
      return Exec(*exec);
    };
  });

  auto shell = std::make_shared<ExecOptions>();
  auto* shell_cmd =
      app.add_subcommand("shell", "Open an interactive login shell (bash, else sh) in a sandbox");
  shell_cmd->add_option("id", shell->sandbox, "Sandbox id, name or unique id prefix")->required();
  AddCommonOptions(shell_cmd, shell.get());
  shell_cmd->footer("Same as: abox exec -t ID -- sh -c '" + std::string(kShellScript) +
                    "'\nLeave the shell with `exit` or Ctrl-D; the sandbox keeps running.");
  shell_cmd->callback([shell, action] {
    *action = [shell] {
      shell->tty = true;
      shell->argv = {"sh", "-c", kShellScript};
      return Exec(*shell);
    };
  });
}

}  // namespace abox::cli
