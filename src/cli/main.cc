// abox: command-line client. Thin: every VM and image operation lives in the libraries.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "spdlog/spdlog.h"
#include "src/base/version.h"
#include "src/cli/agent_commands.h"
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
#include "src/cli/secret_commands.h"
#include "src/cli/usage_errors.h"
#include "src/cli/workspace_commands.h"
#include "src/proto/frame.h"

namespace {

constexpr char kAppFooter[] =
    R"(The sandbox commands (run, create, exec, shell, ls, inspect, logs, stop, rm, events, egress,
checkpoint, pause, secret) talk to aboxd, the per-user daemon that keeps sandboxes; the first of them
starts it (see `abox daemon --help`). `abox run --direct` boots a VM without aboxd.

Environment: ABOX_HOME (images, sandboxes, logs; default ~/.local/share/abox),
ABOX_SOCKET (aboxd's socket; default $XDG_RUNTIME_DIR/abox/aboxd.sock, else
$ABOX_HOME/run/aboxd.sock; abox refuses a socket whose directory is not yours with mode 0700,
or whose server runs as another user),
ABOX_NO_AUTOSTART=1 (never start aboxd on demand), ABOX_RUN_DIRECT=1 (`abox run --direct`),
ABOXD_BIN (the aboxd executable),
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
  if (argc > 1 && (std::string(argv[1]) == "run" || std::string(argv[1]) == "exec" ||
                   std::string(argv[1]) == "agent")) {
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

  abox::cli::AddRunCommand(app, &action, &run_tail, &run_has_separator);

  // abox image ...
  auto* image_cmd = app.add_subcommand("image", "Build, list and verify guest images");
  image_cmd->require_subcommand(1);
  abox::cli::ImageBuildOptions build;
  std::string packages;
  auto* build_cmd = image_cmd->add_subcommand(
      "build", "Build a Debian guest image (rootfs, kernel, initramfs) from Debian packages");
  build_cmd->add_option("--name", build.name,
                        "Image name (default: \"default\" for the developer preset, else the "
                        "preset's name)");
  build_cmd->add_option("--preset", build.preset, abox::cli::ImagePresetHelp())
      ->capture_default_str();
  build_cmd->add_option("--packages", packages, "Extra Debian packages, comma- or space-separated");
  build_cmd->add_flag("--force", build.force, "Rebuild even when the image is up to date");
  build_cmd
      ->add_option("--agent", build.agents,
                   "Install a coding agent CLI: claude or codex, optionally @VERSION "
                   "(default: the latest). Repeatable. Downloaded with the host's npm "
                   "--ignore-scripts; cached by version")
      ->allow_extra_args(false);
  // Hidden: build with another abox-guest binary (the e2e tests build a hostile guest this way).
  build_cmd->add_option("--guest-binary", build.guest_binary, "")->group("");
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
  abox::cli::AddSecretCommands(app, &action);
  abox::cli::AddAgentCommands(app, &action, &run_tail);
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
