// abox: command-line client. Thin: every VM and image operation lives in the libraries.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "spdlog/spdlog.h"
#include "src/base/version.h"
#include "src/cli/checkpoint_commands.h"
#include "src/cli/command.h"
#include "src/cli/daemon_commands.h"
#include "src/cli/doctor.h"
#include "src/cli/egress_commands.h"
#include "src/cli/exec_command.h"
#include "src/cli/flags.h"
#include "src/cli/image_commands.h"
#include "src/cli/log_commands.h"
#include "src/cli/mcp_commands.h"
#include "src/cli/output.h"
#include "src/cli/run_command.h"
#include "src/cli/sandbox_commands.h"
#include "src/cli/usage_errors.h"
#include "src/cli/workspace_commands.h"
#include "src/proto/frame.h"

namespace {

constexpr char kRunFooter[] =
    R"(Exit status: the command's own exit code, 128+N when it was killed by signal N,
124 when --timeout killed it, 125 when abox or the VM failed (the error names the
console log), 126/127 when the command could not be run or was not found, and 130
when a second Ctrl-C tore the VM down.
Ctrl-C (and SIGTERM/SIGHUP/SIGQUIT) is forwarded to the command; a second one stops the VM.

Example: abox run -e FOO=bar --timeout 60 -- sh -c 'echo $FOO; uname -r'
)";

constexpr char kAppFooter[] =
    R"(`abox run` boots a throwaway VM for one command, directly. The other sandbox commands
(create, exec, shell, ls, inspect, logs, stop, rm, events, egress) talk to aboxd, the per-user
daemon that keeps sandboxes; the first of them starts it (see `abox daemon --help`).

Environment: ABOX_HOME (images, sandboxes, logs; default ~/.local/share/abox),
ABOX_SOCKET (aboxd's socket; default $XDG_RUNTIME_DIR/abox/aboxd.sock, else
$ABOX_HOME/run/aboxd.sock; abox refuses a socket whose directory is not yours with mode 0700,
or whose server runs as another user),
ABOX_NO_AUTOSTART=1 (never start aboxd on demand), ABOXD_BIN (the aboxd executable),
ABOX_LOG (abox's own log level, e.g. info).
)";

}  // namespace

int main(int argc, char** argv) {
  // Library diagnostics go through spdlog; a person sees errors only unless ABOX_LOG asks.
  spdlog::set_level(spdlog::level::err);
  if (const char* level = std::getenv("ABOX_LOG")) {  // NOLINT(concurrency-mt-unsafe)
    spdlog::set_level(spdlog::level::from_str(level));
  }
  // `abox run|exec [OPTIONS] -- CMD...`: everything after the first `--` is the command,
  // verbatim, before CLI11 sees it (CLI11 would otherwise parse the command's own flags). When a
  // command word comes before that `--` (`abox exec ID echo -- hi`), the `--` and what follows
  // are that command's arguments (CommandLine()).
  std::vector<std::string> run_tail;
  bool run_has_separator = false;
  if (argc > 1 && (std::string(argv[1]) == "run" || std::string(argv[1]) == "exec")) {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--") {
        run_tail.assign(argv + i + 1, argv + argc);
        run_has_separator = true;
        argc = i;
        break;
      }
    }
  }
  CLI::App app{"abox: a disposable Linux microVM for every AI coding agent"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("abox ") + abox::kVersion);
  abox::cli::Action action;

  // abox run
  abox::cli::RunOptions run;
  std::string accel = "auto";
  std::vector<std::string> env_items;
  std::string run_workspace;
  auto* run_cmd =
      app.add_subcommand("run", "Boot a fresh microVM, run a command in it, destroy it");
  run_cmd->add_option("--image", run.sandbox.image, "Guest image to boot")->capture_default_str();
  run_cmd->add_option("--cpus", run.sandbox.cpus, "Virtual CPUs")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  run_cmd->add_option("--memory", run.sandbox.memory_mib, "Guest memory in MiB")
      ->check(CLI::Range(128, 262144))
      ->capture_default_str();
  run_cmd
      ->add_option("--timeout", run.timeout_seconds,
                   "Kill the command (its whole process group) after S seconds")
      ->check(CLI::Range(0.001, 31536000.0));
  run_cmd->add_option("-e,--env", env_items, "Set an environment variable (NAME=VALUE)")
      ->allow_extra_args(false);
  run_cmd->add_option("-w,--workspace", run_workspace,
                      "Copy this host directory to /workspace in the guest first (the command "
                      "starts there); the copy goes away with the VM (use abox create -w to "
                      "bring changes back)");
  run_cmd->add_option("--workdir", run.workdir,
                      "Working directory inside the guest (default: the user's home)");
  run_cmd->add_flag("--root", run.root,
                    "Run as root in the guest (default: the unprivileged "
                    "user 'agent')");
  run_cmd->add_flag("!--no-stdin", run.forward_stdin, "Give the command /dev/null as stdin");
  run_cmd->add_flag("-t,--tty", run.tty,
                    "Give the command a terminal (PTY; stdout and stderr merged), e.g. "
                    "abox run -t -- bash");
  run_cmd->add_option("--accel", accel, "Accelerator: auto (probe KVM, else TCG), kvm or tcg")
      ->check(CLI::IsMember({"auto", "kvm", "tcg"}))
      ->capture_default_str();
  // Everything after the first positional (or after --) is the command, untouched. No
  // allow_extras(): an unknown flag before the command is refused (CheckCommandStart), not
  // dropped.
  run_cmd->prefix_command();
  run_cmd->footer(kRunFooter);

  // abox image ...
  auto* image_cmd = app.add_subcommand("image", "Build, list and verify guest images");
  image_cmd->require_subcommand(1);
  abox::cli::ImageBuildOptions build;
  std::string packages;
  auto* build_cmd = image_cmd->add_subcommand(
      "build", "Build a Debian guest image (rootfs, kernel, initramfs) from Debian packages");
  build_cmd->add_option("--name", build.name, "Image name")->capture_default_str();
  build_cmd->add_option("--packages", packages, "Extra Debian packages, comma- or space-separated");
  build_cmd->add_flag("--force", build.force, "Rebuild even when the image is up to date");
  // Hidden: build with another agent binary (the e2e tests build a hostile guest this way).
  build_cmd->add_option("--agent", build.agent, "")->group("");
  bool ls_json = false;
  auto* ls_cmd = image_cmd->add_subcommand("ls", "List images");
  ls_cmd->add_flag("--json", ls_json, "Print JSON");
  std::string verify_name;
  auto* verify_cmd =
      image_cmd->add_subcommand("verify", "Recompute every artifact's sha256 against the manifest");
  verify_cmd->add_option("name", verify_name, "Image name")->required();

  abox::cli::AddSandboxCommands(app, &action);
  abox::cli::AddExecCommands(app, &action, &run_tail, &run_has_separator);
  abox::cli::AddLogCommands(app, &action);
  abox::cli::AddWorkspaceCommands(app, &action);
  abox::cli::AddCheckpointCommands(app, &action);
  abox::cli::AddEgressCommands(app, &action);
  abox::cli::AddDaemonCommands(app, &action);
  abox::cli::AddMcpCommands(app, &action);
  abox::cli::AddDoctorCommand(app, &action);
  // Last: subcommands added after it would inherit it.
  app.footer(kAppFooter);

  if (std::optional<int> code = abox::cli::ParseCommandLine(app, argc, argv)) {
    return *code;
  }

  if (action) {
    return action();
  }
  if (run_cmd->parsed()) {
    auto env = abox::cli::ParseKeyValues("-e", "NAME=VALUE", env_items);
    if (!env.ok()) {
      abox::cli::PrintError(env.status());
      return abox::cli::kExitAboxFailure;
    }
    run.env = *std::move(env);
    std::vector<std::string> words = run_cmd->remaining();
    if (absl::Status s = abox::cli::CheckCommandStart(*run_cmd, words); !s.ok()) {
      abox::cli::PrintError(s);
      return 2;
    }
    run.argv = abox::cli::CommandLine(std::move(words), run_has_separator, run_tail);
    if (run.argv.empty()) {
      std::fprintf(stderr, "abox: error: abox run needs a command, e.g. abox run -- uname -a\n");
      return 2;
    }
    run.sandbox.accel = *abox::vmm::ParseAccel(accel);
    if (!run_workspace.empty()) {
      run.workspace = abox::workspace::Binding{.host_root = run_workspace};
    }
    return abox::cli::RunInFreshVm(run);
  }
  if (build_cmd->parsed()) {
    build.packages = abox::cli::SplitPackageList(packages);
    return abox::cli::ImageBuild(build);
  }
  if (ls_cmd->parsed()) {
    return abox::cli::ImageList(ls_json);
  }
  if (verify_cmd->parsed()) {
    return abox::cli::ImageVerify(verify_name);
  }
  return 1;
}
