#include "src/cli/daemon_commands.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/api/system.h"
#include "src/api/wire.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/cli/sandbox_format.h"
#include "src/cli/systemd_unit.h"
#include "src/client/answers.h"
#include "src/client/daemon_launcher.h"

extern char** environ;

namespace abox::cli {
namespace {

constexpr char kSandboxesOutliveAboxd[] =
    R"(Sandboxes outlive aboxd: stopping it (abox daemon stop) or killing it leaves their VMs
running, and the next aboxd (the next abox command starts one) re-attaches them; commands that
were running through it are reported as interrupted. An aboxd started with --pause-on-stop
pauses them to disk instead (no VM left; the next command in each resumes it). To end sandboxes,
use abox stop ID or abox rm -f ID before stopping aboxd.
abox daemon stop signals only the process that serves the socket (SO_PEERCRED) once it has
checked that it is your own aboxd.)";

// aboxd flags that `abox daemon start` and `abox daemon unit` pass through.
struct DaemonFlags {
  int max_cpus = 0;
  int max_memory_mib = 0;
  int tcp_port = -1;
  int pool = -1;
  bool pause_on_stop = false;
  bool pause_when_idle = false;
  std::string token_file;
  std::string log_level;

  [[nodiscard]] std::vector<std::string> Args() const {
    std::vector<std::string> args;
    if (max_cpus > 0) {
      args.insert(args.end(), {"--max-cpus", std::to_string(max_cpus)});
    }
    if (max_memory_mib > 0) {
      args.insert(args.end(), {"--max-memory", std::to_string(max_memory_mib)});
    }
    if (tcp_port >= 0) {
      args.insert(args.end(), {"--tcp-port", std::to_string(tcp_port)});
    }
    if (pool >= 0) {
      args.insert(args.end(), {"--pool", std::to_string(pool)});
    }
    if (pause_on_stop) {
      args.emplace_back("--pause-on-stop");
    }
    if (pause_when_idle) {
      args.emplace_back("--pause-when-idle");
    }
    if (!token_file.empty()) {  // absolute: aboxd runs from another directory
      args.insert(args.end(), {"--token-file", std::filesystem::absolute(token_file).string()});
    }
    if (!log_level.empty()) {
      args.insert(args.end(), {"--log-level", log_level});
    }
    return args;
  }
};

void AddDaemonFlags(CLI::App* cmd, DaemonFlags* flags) {
  cmd->add_option("--max-cpus", flags->max_cpus,
                  "vCPUs all sandboxes together may use (aboxd's default: 2 per host core)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-memory", flags->max_memory_mib,
                  "MiB of guest memory all sandboxes together may use (aboxd's default: 3/4 of "
                  "the RAM minus 1 GiB)")
      ->check(CLI::Range(128, 1 << 30));
  cmd->add_option("--tcp-port", flags->tcp_port,
                  "Also serve 127.0.0.1:PORT (0 picks one); every request there needs the bearer "
                  "token")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--pool", flags->pool,
                  "Idle VMs aboxd keeps restored and ready per image and size (0: none; aboxd's "
                  "default: $ABOX_POOL, else up to 2 as the memory budget allows)")
      ->check(CLI::Range(0, 64));
  cmd->add_flag("--pause-on-stop", flags->pause_on_stop,
                "aboxd's stop pauses the running sandboxes (saved to disk) instead of leaving "
                "them running");
  cmd->add_flag("--pause-when-idle", flags->pause_when_idle,
                "An idle timeout pauses the sandbox instead of stopping it");
  cmd->add_option("--token-file", flags->token_file,
                  "File with the TCP bearer token (aboxd's default: $ABOX_HOME/tcp-token, "
                  "created)");
  cmd->add_option("--log-level", flags->log_level, "aboxd's log level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
}

absl::StatusOr<client::DaemonOptions> Options(const DaemonFlags& flags) {
  ABOX_ASSIGN_OR_RETURN(client::DaemonOptions options, client::DaemonOptionsFromEnv());
  options.extra_args = flags.Args();
  return options;
}

int Start(const DaemonFlags& flags, bool foreground) {
  absl::StatusOr<client::DaemonOptions> options = Options(flags);
  if (!options.ok()) {
    return Fail(options.status());
  }
  if (foreground) {
    absl::StatusOr<std::string> aboxd = client::FindAboxd(*options);
    if (!aboxd.ok()) {
      return Fail(aboxd.status());
    }
    if (absl::StatusOr<pid_t> pid = client::RunningDaemonPid(options->socket_path); pid.ok()) {
      return Fail(absl::AlreadyExistsError(
          absl::StrCat("aboxd is already running (pid ", *pid, ") on ", options->socket_path,
                       "; stop it first with `abox daemon stop`")));
    }
    std::vector<std::string> argv = client::AboxdArgv(*aboxd, *options);
    std::vector<char*> args;
    for (std::string& a : argv) {
      args.push_back(a.data());
    }
    args.push_back(nullptr);
    std::fflush(nullptr);
    ::execve(args[0], args.data(), environ);
    return Fail(base::ErrnoError(absl::StrCat("execve(", *aboxd, ")")));
  }
  absl::StatusOr<pid_t> pid = client::StartDaemon(*options);
  if (!pid.ok()) {
    return Fail(pid.status());
  }
  std::printf("aboxd started (pid %d)\n  socket: %s\n  log:    %s\n", *pid,
              options->socket_path.c_str(), options->log_path.c_str());
  return 0;
}

int Stop() {
  absl::StatusOr<client::DaemonOptions> options = client::DaemonOptionsFromEnv();
  if (!options.ok()) {
    return Fail(options.status());
  }
  absl::StatusOr<pid_t> pid = client::StopDaemon(*options);
  if (!pid.ok() && pid.status().code() == absl::StatusCode::kNotFound) {
    std::printf("aboxd is not running (socket %s)\n", options->socket_path.c_str());
    return 0;
  }
  if (!pid.ok()) {
    return Fail(pid.status());
  }
  std::printf("aboxd (pid %d) stopped\n", *pid);
  return 0;
}

int Status(bool json) {
  absl::StatusOr<client::DaemonOptions> options = client::DaemonOptionsFromEnv();
  if (!options.ok()) {
    return Fail(options.status());
  }
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api =
      client::ApiClient::Create(options->socket_path);
  if (!api.ok()) {
    return Fail(api.status());
  }
  (*api)->set_timeout(absl::Seconds(10));
  absl::StatusOr<api::Health> health = client::CheckHealth(**api);
  if (!health.ok() && client::IsNothingListening(health.status())) {
    return Fail(absl::UnavailableError(
        absl::StrCat("aboxd is not running (nothing listens on ", options->socket_path,
                     "); start it with `abox daemon start` (other commands start it on demand)")));
  }
  if (!health.ok()) {
    return Fail(health.status());
  }
  absl::StatusOr<client::ApiResponse> answer = (*api)->Get("/v1/version");
  if (!answer.ok()) {
    return Fail(answer.status());
  }
  absl::StatusOr<api::Version> version =
      client::DecodeAnswer(*answer, "GET /v1/version", api::DecodeVersion);
  if (!version.ok()) {
    return Fail(version.status());
  }
  if (json) {
    nlohmann::json out = {{"socket", options->socket_path},
                          {"health", api::ToJson(*health)},
                          {"version", api::ToJson(*version)}};
    std::printf("%s\n", api::Dump(out, 2).c_str());
    return 0;
  }
  std::printf("%s", DaemonStatusText(*health, *version, options->socket_path).c_str());
  return 0;
}

int Unit(const DaemonFlags& flags, bool install) {
  absl::StatusOr<client::DaemonOptions> options = Options(flags);
  if (!options.ok()) {
    return Fail(options.status());
  }
  absl::StatusOr<std::string> aboxd = client::FindAboxd(*options);
  absl::StatusOr<base::HostLayout> paths = base::ResolveHostLayout();
  if (!aboxd.ok() || !paths.ok()) {
    return Fail(aboxd.ok() ? paths.status() : aboxd.status());
  }
  std::string unit = SystemdUnit(
      client::AboxdArgv(std::filesystem::absolute(*aboxd).string(), *options),
      {{"ABOX_HOME", paths->home.string()}, {"ABOX_CACHE_DIR", paths->cache_dir.string()}});
  if (!install) {
    std::printf("%s", unit.c_str());
    return 0;
  }
  absl::StatusOr<std::string> path = SystemdUnitPath();
  if (!path.ok()) {
    return Fail(path.status());
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(*path).parent_path(), ec);
  if (ec) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("cannot create ", std::filesystem::path(*path).parent_path().string(), ": ",
                     ec.message())));
  }
  if (absl::Status s = base::WriteFileAtomic(*path, unit, 0644); !s.ok()) {
    return Fail(s);
  }
  std::printf("wrote %s\nnow run:\n  %s\n", path->c_str(), kSystemdEnableCommand);
  return 0;
}

}  // namespace

void AddDaemonCommands(CLI::App& app, Action* action) {
  auto* daemon =
      app.add_subcommand("daemon",
                         "Start, stop and inspect aboxd, the per-user daemon that keeps sandboxes "
                         "(commands start it on demand unless ABOX_NO_AUTOSTART=1)");
  daemon->require_subcommand(1);

  auto start_flags = std::make_shared<DaemonFlags>();
  auto foreground = std::make_shared<bool>(false);
  auto* start = daemon->add_subcommand(
      "start", "Start aboxd in the background (its log: $ABOX_HOME/logs/aboxd.log)");
  start->add_flag("--foreground", *foreground,
                  "Run aboxd in this terminal instead (it replaces abox; logs go to stderr) until "
                  "Ctrl-C");
  AddDaemonFlags(start, start_flags.get());
  start->callback([=] { *action = [=] { return Start(*start_flags, *foreground); }; });

  auto* stop = daemon->add_subcommand(
      "stop",
      "Stop aboxd (SIGTERM) and wait up to 30 s for it; its sandboxes keep running (stop or "
      "remove them first with abox stop / abox rm -f)");
  stop->footer(kSandboxesOutliveAboxd);
  stop->callback([action] { *action = [] { return Stop(); }; });

  auto json = std::make_shared<bool>(false);
  auto* status = daemon->add_subcommand(
      "status", "Show whether aboxd runs: pid, socket, version, uptime, vCPU and memory budget");
  status->add_flag("--json", *json,
                   "Print {\"socket\", \"health\", \"version\"} with the API's objects");
  status->callback([=] { *action = [=] { return Status(*json); }; });

  auto unit_flags = std::make_shared<DaemonFlags>();
  auto install = std::make_shared<bool>(false);
  auto* unit = daemon->add_subcommand(
      "unit", "Print a systemd user unit that runs aboxd (or install it with --install)");
  unit->add_flag("--install", *install,
                 "Write it to ~/.config/systemd/user/aboxd.service and print the systemctl "
                 "command that enables it");
  AddDaemonFlags(unit, unit_flags.get());
  unit->callback([=] { *action = [=] { return Unit(*unit_flags, *install); }; });
  daemon->footer(kSandboxesOutliveAboxd);  // last: its subcommands would inherit it
}

}  // namespace abox::cli
