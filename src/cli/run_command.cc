#include "src/cli/run_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/api/exec.h"
#include "src/api/sandbox.h"
#include "src/cli/exec_command.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"
#include "src/cli/sandbox_commands.h"
#include "src/cli/terminal.h"
#include "src/cli/usage_errors.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"

namespace abox::cli {
namespace {

constexpr char kRunFooter[] =
    R"(By default the sandbox comes from aboxd (started on demand), like `abox create`: a pooled
VM or a clone of the image's golden snapshot when there is one, with aboxd's egress policy
unless --egress/--allow say otherwise. It is removed when the command ends; if abox is killed,
aboxd stops it after 60 s without a command and the next `abox run` removes it.
--direct (or ABOX_RUN_DIRECT=1) boots the VM here, without aboxd: no pool, no snapshot, no
egress at all; the VM dies with abox, even on SIGKILL.

Exit status: the command's own exit code, 128+N when it was killed by signal N,
124 when --timeout killed it, 125 when abox, aboxd or the VM failed, 126/127 when the
command could not be run or was not found, and 130 when a second Ctrl-C gave up on it.
When the guest's OOM killer ended the command (137) or some of its processes, a line on
stderr says so and how to give the sandbox more memory (--memory).
Ctrl-C (and SIGTERM/SIGHUP/SIGQUIT) is forwarded to the command; a second one ends it and
the sandbox.

Example: abox run -e FOO=bar --timeout 60 -- sh -c 'echo $FOO; uname -r'
)";

bool DirectFromEnvironment() {
  const char* direct = std::getenv("ABOX_RUN_DIRECT");  // NOLINT(concurrency-mt-unsafe)
  return direct != nullptr && std::string(direct) == "1";
}

// A name the run can remove its sandbox by even when the create answer never came (Ctrl-C).
std::string RunSandboxName() {
  std::string id = runtime::NewSandboxId();
  return absl::StrCat("run-", id.substr(0, 8));
}

api::SandboxCreate CreateBody(const RunOptions& o, const std::string& name) {
  api::SandboxCreate body;
  body.image = o.sandbox.image;
  body.name = name;
  body.cpus = o.sandbox.cpus;
  body.memory_mib = o.sandbox.memory_mib;
  body.disk_mib = o.sandbox.disk_mib > 0 ? o.sandbox.disk_mib : api::kDefaultDiskMib;
  body.accel = vmm::AccelName(o.sandbox.accel);
  body.cold = o.cold;
  body.labels[kRunLabel] = "1";
  body.idle_timeout_seconds = kRunIdleTimeoutSeconds;
  if (o.workspace) {
    api::WorkspaceSpec ws = WorkspaceSpecFor(o.workspace->host_root);
    ws.guest_path = o.workspace->guest_path;
    body.workspace = std::move(ws);
  }
  body.egress = EgressSpecFor(o.egress, o.allow);
  return body;
}

api::ExecCreate ExecBody(const RunOptions& o) {
  api::ExecCreate body;
  body.argv = o.argv;
  body.env = o.env;
  body.cwd = o.workdir;
  body.sync = false;  // the create copied the workspace in, and nothing comes back from a run
  body.stdin_open = o.forward_stdin;
  body.kill_on_disconnect = true;
  if (o.root) {
    body.user = "root";
  }
  if (o.timeout_seconds > 0) {
    body.timeout_ms = static_cast<int64_t>(o.timeout_seconds * 1000);
  }
  if (o.tty) {
    const char* term = std::getenv("TERM");  // NOLINT(concurrency-mt-unsafe)
    body.env.emplace("TERM", term != nullptr && *term != '\0' ? term : "xterm-256color");
    WindowSize size = TerminalSize().value_or(WindowSize{24, 80});
    body.pty = std::make_pair(int64_t{size.rows}, int64_t{size.cols});
  }
  return body;
}

// Removes `name` (force: whatever state it is in). A failure is a line with what to do.
void RemoveRunSandbox(const std::string& socket, const std::string& name) {
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = client::ApiClient::Create(socket);
  absl::Status removed =
      api.ok() ? (*api)
                     ->Delete(client::WithQuery(client::SandboxPath(name), {{"force", "true"}}))
                     .status()
               : api.status();
  if (!removed.ok() && removed.code() != absl::StatusCode::kNotFound) {
    std::fprintf(
        stderr,
        "abox: could not remove the run's sandbox %s: %s (remove it with `abox rm -f %s`)\n",
        name.c_str(), std::string(removed.message()).c_str(), name.c_str());
  }
}

// The sandboxes killed runs left in aboxd: stopped by their idle timeout, failed or paused.
// Running ones may be another run's: their idle timeout takes care of them.
void RemoveRunLeftovers(client::ApiClient& api) {
  absl::StatusOr<client::ApiResponse> listed =
      api.Get(client::WithQuery("/v1/sandboxes", {{"label", absl::StrCat(kRunLabel, "=1")}}));
  if (!listed.ok()) {
    return;  // the create that follows says what is wrong with aboxd
  }
  absl::StatusOr<std::vector<api::Sandbox>> sandboxes =
      client::DecodeAnswer(*listed, "GET /v1/sandboxes", api::DecodeSandboxList);
  if (!sandboxes.ok()) {
    return;
  }
  for (const api::Sandbox& s : *sandboxes) {
    if (s.state == "stopped" || s.state == "failed" || s.state == "paused") {
      RemoveRunSandbox(api.socket_path(), s.id);
    }
  }
}

}  // namespace

int RunThroughDaemon(const RunOptions& o) {
  std::string name = RunSandboxName();
  const api::SandboxCreate body = CreateBody(o, name);
  ::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status(), kExitAboxFailure);
  }
  RemoveRunLeftovers(**api);
  const std::string socket = (*api)->socket_path();

  // Blocked before any thread starts, so only our SignalForwarders see them. A signal while the
  // sandbox is being made gives up on it (nothing runs yet); after that, signals are the
  // command's (RelayExec).
  BlockHandledSignals();
  std::atomic<bool> interrupted{false};
  auto creating = std::make_unique<SignalForwarder>(SignalForwarder::Handlers{
      .on_signal =
          [&](int, int) {
            interrupted = true;
            (*api)->Cancel();
            return false;
          },
      .on_resize = [] {},
  });
  bool progress = ::isatty(STDERR_FILENO) != 0;
  if (progress) {
    std::fprintf(stderr, "starting sandbox...");
    std::fflush(stderr);
  }
  absl::StatusOr<client::ApiResponse> created = (*api)->Post("/v1/sandboxes", api::ToJson(body));
  creating->Stop();
  if (progress) {
    std::fprintf(stderr, "\r\033[K");
  }
  if (interrupted) {
    std::fprintf(stderr, "abox: interrupted: removing the sandbox\n");
    RemoveRunSandbox(socket, name);
    return kExitInterrupted;
  }
  if (!created.ok()) {
    RemoveRunSandbox(socket, name);  // a failed create leaves a record to look at; not a run's
    return Fail(created.status(), kExitAboxFailure);
  }
  absl::StatusOr<api::Sandbox> sandbox =
      client::DecodeAnswer(*created, "POST /v1/sandboxes", api::DecodeSandbox);
  const std::string id = sandbox.ok() ? sandbox->id : name;
  int code = RelayExec(**api, id, ExecBody(o), "abox run");
  RemoveRunSandbox(socket, id);
  return code;
}

void AddRunCommand(CLI::App& app, Action* action, const std::vector<std::string>* tail,
                   const bool* has_tail) {
  struct Parsed {
    RunOptions run;
    std::string accel = "auto";
    std::vector<std::string> env_items;
    std::string workspace;
    std::string disk;
    bool direct = false;
  };
  auto p = std::make_shared<Parsed>();
  p->run.sandbox.memory_mib = static_cast<int>(api::kDefaultMemoryMib);
  auto* cmd = app.add_subcommand("run", "Run a command in a fresh sandbox, then remove it");
  cmd->add_option("--image", p->run.sandbox.image, "Guest image")->capture_default_str();
  cmd->add_option("--cpus", p->run.sandbox.cpus, "Virtual CPUs")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--memory", p->run.sandbox.memory_mib, "Guest memory in MiB")
      ->check(CLI::Range(128, 262144))
      ->capture_default_str();
  cmd->add_option("--timeout", p->run.timeout_seconds,
                  "Kill the command (its whole process group) after S seconds")
      ->check(CLI::Range(0.001, 31536000.0));
  cmd->add_option("-e,--env", p->env_items, "Set an environment variable (NAME=VALUE)")
      ->allow_extra_args(false);
  cmd->add_option("-w,--workspace", p->workspace,
                  "Copy this host directory to /workspace in the guest first (the command "
                  "starts there); the copy goes away with the sandbox (use abox create -w to "
                  "bring changes back)");
  cmd->add_option("--workdir", p->run.workdir,
                  "Working directory inside the guest (default: the user's home)");
  cmd->add_flag("--root", p->run.root,
                "Run as root in the guest (default: the unprivileged user 'agent')");
  cmd->add_flag("!--no-stdin", p->run.forward_stdin, "Give the command /dev/null as stdin");
  cmd->add_flag("-t,--tty", p->run.tty,
                "Give the command a terminal (PTY; stdout and stderr merged), e.g. "
                "abox run -t -- bash");
  cmd->add_option("--disk", p->disk, "Guest disk: 32G, 500M or MiB (default 16G, sparse)");
  cmd->add_option("--accel", p->accel, "Accelerator: auto (probe KVM, else TCG), kvm or tcg")
      ->check(CLI::IsMember({"auto", "kvm", "tcg"}))
      ->capture_default_str();
  cmd->add_flag("--cold", p->run.cold,
                "Boot the kernel instead of taking a pooled VM or cloning the golden snapshot");
  cmd->add_option("--egress", p->run.egress,
                  "Egress mode for this sandbox: none, allowlist or open (default: aboxd's)");
  cmd->add_option("--allow", p->run.allow,
                  "Allow this destination (e.g. pypi.org, *.github.com:443); repeatable")
      ->allow_extra_args(false);
  cmd->add_flag("--direct", p->direct,
                "Boot the VM here without aboxd (no pool, no snapshot, no egress); also "
                "ABOX_RUN_DIRECT=1");
  // Everything after the first positional (or after --) is the command, untouched. No
  // allow_extras(): an unknown flag before the command is refused (CheckCommandStart), not
  // dropped.
  cmd->prefix_command();
  cmd->footer(kRunFooter);
  cmd->callback([p, cmd, action, tail, has_tail] {
    *action = [p, cmd, tail, has_tail] {
      RunOptions& run = p->run;
      absl::StatusOr<std::map<std::string, std::string>> env =
          ParseKeyValues("-e", "NAME=VALUE", p->env_items);
      if (!env.ok()) {
        return Fail(env.status(), kExitAboxFailure);
      }
      run.env = *std::move(env);
      std::vector<std::string> words = cmd->remaining();
      if (absl::Status s = CheckCommandStart(*cmd, words); !s.ok()) {
        return Fail(s, 2);
      }
      run.argv = CommandLine(std::move(words), *has_tail, *tail);
      if (run.argv.empty()) {
        std::fprintf(stderr, "abox: error: abox run needs a command, e.g. abox run -- uname -a\n");
        return 2;
      }
      run.sandbox.accel = *vmm::ParseAccel(p->accel);
      run.sandbox.disk_mib = api::kDefaultDiskMib;
      if (!p->disk.empty()) {
        absl::StatusOr<int64_t> disk = ParseSizeMib("--disk", p->disk);
        if (!disk.ok()) {
          return Fail(disk.status(), 2);
        }
        run.sandbox.disk_mib = *disk;
      }
      if (!p->workspace.empty()) {
        run.workspace = workspace::Binding{.host_root = p->workspace};
      }
      if (p->direct || DirectFromEnvironment()) {
        if (!run.egress.empty() || !run.allow.empty()) {  // (--cold: a direct run boots anyway)
          std::fprintf(stderr,
                       "abox: error: --egress and --allow are for sandboxes made by aboxd (a "
                       "direct run has no egress): drop --direct (or ABOX_RUN_DIRECT=1)\n");
          return 2;
        }
        return RunInFreshVm(run);
      }
      return RunThroughDaemon(run);
    };
  });
}

}  // namespace abox::cli
