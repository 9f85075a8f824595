#include "src/cli/mcp_commands.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/host_layout.h"
#include "src/base/self_path.h"
#include "src/base/status_macros.h"
#include "src/cli/flags.h"
#include "src/cli/mcp_status.h"
#include "src/cli/output.h"
#include "src/cli/usage_errors.h"

namespace abox::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kPersonsFlags[] =
    R"(The --allow-* flags are yours, never the model's: they are written into the client's
config as arguments of abox-mcp, and the agent cannot change them through the MCP server.
Without them the agent can create, use, stop and remove its own sandboxes and ask for network
access; applying changes to your files, changing egress rules directly and removing sandboxes it
did not create stay with you.

Every file is backed up before it changes ($ABOX_HOME/mcp-backups/<time>-<client>-<action>/,
with manifest.json) and written atomically; re-running changes nothing. `abox mcp uninstall`
removes exactly what install added. The server command is abox-mcp from next to this abox
($ABOX_MCP_BIN overrides it). Codex's home is $CODEX_HOME (default ~/.codex).
)";

constexpr char kScopes[] =
    R"(Where (project scope is the default, DIR the current directory):
  claude  project  DIR/.mcp.json, DIR/.claude/skills/abox/SKILL.md
          global   ~/.claude.json (mcpServers), ~/.claude/skills/abox/SKILL.md
  codex   project  DIR/.codex/config.toml (read by Codex only in a trusted project), DIR/AGENTS.md
          global   $CODEX_HOME/config.toml, $CODEX_HOME/AGENTS.md
  cursor  project  DIR/.cursor/mcp.json, DIR/.cursor/rules/abox.mdc
          global   ~/.cursor/mcp.json
)";

struct Flags {
  std::string client;
  std::string project;
  bool global = false;
  bool allow_apply = false;
  bool allow_egress_changes = false;
  bool allow_remove_any = false;
  std::vector<std::string> allow_secrets;
  bool dry_run = false;
  bool json = false;
};

McpClient ClientOf(const std::string& name) {
  if (name == "codex") {
    return McpClient::kCodex;
  }
  return name == "cursor" ? McpClient::kCursor : McpClient::kClaude;
}

std::string ClientTitle(McpClient client) {
  switch (client) {
    case McpClient::kClaude:
      return "Claude Code";
    case McpClient::kCodex:
      return "Codex";
    case McpClient::kCursor:
      return "Cursor";
  }
  return "?";
}

absl::StatusOr<fs::path> HomeDir() {
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe): read-only
  if (home != nullptr && home[0] == '/') {
    return fs::path(home);
  }
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) {
    return fs::path(found->pw_dir);
  }
  return absl::FailedPreconditionError("cannot find your home directory: set HOME");
}

absl::StatusOr<McpPaths> ResolvePaths(const std::string& project) {
  McpPaths paths;
  ABOX_ASSIGN_OR_RETURN(paths.home, HomeDir());
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only
  if (const char* codex = std::getenv("CODEX_HOME"); codex != nullptr && codex[0] != '\0') {
    paths.codex_home = fs::absolute(codex);
  } else {
    paths.codex_home = paths.home / ".codex";
  }
  ABOX_ASSIGN_OR_RETURN(base::HostLayout layout, base::ResolveHostLayout());
  paths.abox_home = layout.home;
  std::error_code ec;
  paths.project = fs::absolute(project.empty() ? fs::current_path(ec) : fs::path(project), ec);
  if (ec || !fs::is_directory(paths.project, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the project directory ", paths.project.string(),
                     " does not exist; pass an existing one with --project DIR"));
  }
  paths.project = paths.project.lexically_normal();
  if (paths.project.string().size() > 1 && paths.project.string().back() == '/') {
    paths.project = paths.project.parent_path();
  }
  return paths;
}

// abox-mcp beside this abox; `found` false when it is not there (yet).
struct ServerBinary {
  std::string path;
  bool found = false;
};

ServerBinary FindServerBinary() {
  absl::StatusOr<std::string> found = base::FindCompanionBinary("abox-mcp", "ABOX_MCP_BIN");
  if (found.ok()) {
    return {fs::absolute(*found).lexically_normal().string(), true};
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only
  if (const char* env = std::getenv("ABOX_MCP_BIN"); env != nullptr && env[0] != '\0') {
    return {fs::absolute(env).lexically_normal().string(), false};
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return {(exe.parent_path() / "abox-mcp").string(), false};
}

McpServerCommand ServerCommand(const Flags& flags, const ServerBinary& binary) {
  McpServerCommand server{.command = binary.path};
  if (flags.allow_apply) {
    server.args.emplace_back("--allow-apply");
  }
  if (flags.allow_egress_changes) {
    server.args.emplace_back("--allow-egress-changes");
  }
  if (flags.allow_remove_any) {
    server.args.emplace_back("--allow-remove-any");
  }
  for (const std::string& name : flags.allow_secrets) {
    server.args.emplace_back("--allow-secret");
    server.args.push_back(name);
  }
  return server;
}

std::string CheckHint(const McpReport& report) {
  switch (report.client) {
    case McpClient::kClaude:
      return report.scope == McpScope::kProject
                 ? "run `claude mcp list` in the project (Claude Code asks once whether to trust "
                   "the project's .mcp.json servers), or /mcp inside Claude Code"
                 : "run `claude mcp list`, or /mcp inside Claude Code";
    case McpClient::kCodex:
      return "run `codex mcp list`, or /mcp inside Codex";
    case McpClient::kCursor:
      return "open Cursor Settings > MCP (Tools & Integrations): abox should be listed and "
             "enabled";
  }
  return "";
}

int PrintReport(const Flags& flags, const McpReport& report, const McpServerCommand& server,
                bool installing) {
  if (flags.json) {
    std::printf("%s\n", McpReportJson(report, server).dump(2).c_str());
  } else {
    std::printf("%s", McpReportText(report, server, installing).c_str());
  }
  return 0;
}

int Install(const Flags& flags) {
  ServerBinary binary = FindServerBinary();
  McpServerCommand server = ServerCommand(flags, binary);
  absl::StatusOr<McpPaths> paths = ResolvePaths(flags.project);
  if (!paths.ok()) {
    return Fail(paths.status());
  }
  McpScope scope = flags.global ? McpScope::kGlobal : McpScope::kProject;
  absl::StatusOr<McpReport> report =
      InstallMcp(*paths, ClientOf(flags.client), scope, server, flags.dry_run, absl::Now());
  if (!report.ok()) {
    return Fail(report.status());
  }
  if (!binary.found) {
    report->notes.push_back(
        absl::StrCat("Warning: ", binary.path,
                     " does not exist (yet): the client cannot start the server until it does "
                     "(build it next to abox, or set ABOX_MCP_BIN and install again)"));
  }
  if (report->client == McpClient::kCodex && scope == McpScope::kProject) {
    report->notes.push_back(
        "Codex reads a project's .codex/config.toml only when it trusts the project (it asks the "
        "first time you run codex there); for every project, use `abox mcp install codex "
        "--global`");
  }
  if (report->client == McpClient::kCursor && scope == McpScope::kGlobal) {
    report->notes.push_back(
        "Cursor keeps user rules in its settings, not in files: no rule was written; "
        "`abox mcp install cursor` in a project adds .cursor/rules/abox.mdc there");
  }
  return PrintReport(flags, *report, server, /*installing=*/true);
}

int Uninstall(const Flags& flags) {
  absl::StatusOr<McpPaths> paths = ResolvePaths(flags.project);
  if (!paths.ok()) {
    return Fail(paths.status());
  }
  McpScope scope = flags.global ? McpScope::kGlobal : McpScope::kProject;
  absl::StatusOr<McpReport> report =
      UninstallMcp(*paths, ClientOf(flags.client), scope, flags.dry_run, absl::Now());
  if (!report.ok()) {
    return Fail(report.status());
  }
  return PrintReport(flags, *report, McpServerCommand{}, /*installing=*/false);
}

int Status(const Flags& flags) {
  absl::StatusOr<McpPaths> paths = ResolvePaths(flags.project);
  if (!paths.ok()) {
    return Fail(paths.status());
  }
  std::vector<McpStatusRow> rows = McpStatus(*paths);
  if (flags.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const McpStatusRow& row : rows) {
      out.push_back({{"client", ClientName(row.client)},
                     {"scope", ScopeName(row.scope)},
                     {"installed", row.installed},
                     {"config", row.config},
                     {"command", row.command},
                     {"args", row.args},
                     {"command_executable", row.command_executable},
                     {"guidance", row.guidance},
                     {"guidance_present", row.guidance_present},
                     {"error", row.error}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> table;
  for (const McpStatusRow& row : rows) {
    std::string installed = !row.error.empty() ? "error" : row.installed ? "yes" : "no";
    std::string command = "-";
    if (row.installed) {
      command = row.command_executable ? "ok" : "missing";
    }
    std::string guidance = "-";
    if (!row.guidance.empty()) {
      guidance = row.guidance_present ? "yes" : "no";
    }
    table.push_back({std::string(ClientName(row.client)), std::string(ScopeName(row.scope)),
                     installed, row.args.empty() ? "-" : absl::StrJoin(row.args, " "), command,
                     guidance, row.config});
  }
  std::printf(
      "%s",
      FormatTable({"CLIENT", "SCOPE", "INSTALLED", "FLAGS", "SERVER", "GUIDANCE", "CONFIG"}, table)
          .c_str());
  for (const McpStatusRow& row : rows) {
    if (!row.error.empty()) {
      std::printf("%s %s: %s\n", std::string(ClientName(row.client)).c_str(),
                  std::string(ScopeName(row.scope)).c_str(), row.error.c_str());
    } else if (row.installed && !row.command_executable) {
      std::printf("%s %s: the server %s is not an executable; build abox-mcp or install again\n",
                  std::string(ClientName(row.client)).c_str(),
                  std::string(ScopeName(row.scope)).c_str(), row.command.c_str());
    }
  }
  return 0;
}

// claude, codex or cursor; a misspelling gets its nearest name.
CLI::Validator ClientValidator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::vector<std::string> clients = {"claude", "codex", "cursor"};
        if (std::find(clients.begin(), clients.end(), value) != clients.end()) {
          return "";
        }
        std::string nearest = NearestSpelling(value, clients);
        return absl::StrCat("unknown client '", value, "'",
                            nearest.empty() ? "" : absl::StrCat("; did you mean ", nearest, "?"),
                            " (claude, codex or cursor)");
      },
      "claude|codex|cursor");
}

void AddScopeFlags(CLI::App* cmd, Flags* flags) {
  auto* project = cmd->add_option("--project", flags->project,
                                  "The project directory (default: the current directory)");
  auto* global =
      cmd->add_flag("--global", flags->global, "Your user-wide config instead of a project's");
  project->excludes(global);
}

}  // namespace

std::string McpReportText(const McpReport& report, const McpServerCommand& server,
                          bool installing) {
  std::string where = absl::StrCat(ClientTitle(report.client), ", ", ScopeName(report.scope));
  std::string out;
  if (!report.changed()) {
    absl::StrAppend(
        &out, installing
                  ? absl::StrCat("abox is already installed for ", where, ": nothing changed\n")
                  : absl::StrCat("abox is not installed for ", where, ": nothing changed\n"));
  } else if (report.dry_run) {
    absl::StrAppend(&out, "Dry run, nothing written. ", installing ? "Installing" : "Uninstalling",
                    " abox for ", where, " would:\n");
  } else {
    absl::StrAppend(&out, installing ? "Installed abox for " : "Uninstalled abox from ", where,
                    ":\n");
  }
  for (const FileChange& f : report.files) {
    std::string action(FileActionName(f.action));
    if (report.dry_run && f.action != FileAction::kUnchanged) {
      action = absl::StrCat("would ", action);
    }
    absl::StrAppend(&out, "  ", action,
                    std::string(action.size() < 16 ? 16 - action.size() : 1, ' '), f.path, "\n");
    for (absl::string_view line : absl::StrSplit(f.diff, '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "      ", line, "\n");
    }
  }
  if (!report.backup_dir.empty()) {
    absl::StrAppend(&out, "Backups: ", report.backup_dir,
                    " (the original bytes of each file that existed, and manifest.json)\n");
  }
  if (installing) {
    std::vector<std::string> argv = {server.command};
    argv.insert(argv.end(), server.args.begin(), server.args.end());
    absl::StrAppend(&out, "Server: ", ShellJoin(argv), "\n");
  }
  for (const std::string& note : report.notes) {
    absl::StrAppend(&out, absl::StartsWith(note, "Warning: ") ? "" : "Note: ", note, "\n");
  }
  if (installing && !report.dry_run) {
    absl::StrAppend(&out, "Check: ", CheckHint(report), "\n",
                    "Try:   \"Run this repository's tests in an abox sandbox and tell me what "
                    "fails.\"\n");
  }
  return out;
}

nlohmann::ordered_json McpReportJson(const McpReport& report, const McpServerCommand& server) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const FileChange& f : report.files) {
    nlohmann::ordered_json file = {
        {"path", f.path}, {"role", f.role}, {"action", FileActionName(f.action)}};
    if (!f.backup.empty()) {
      file["backup"] = f.backup;
    }
    if (!f.diff.empty()) {
      file["diff"] = f.diff;
    }
    files.push_back(std::move(file));
  }
  nlohmann::ordered_json out = {{"client", ClientName(report.client)},
                                {"scope", ScopeName(report.scope)},
                                {"dry_run", report.dry_run},
                                {"changed", report.changed()},
                                {"files", std::move(files)},
                                {"backup_dir", report.backup_dir},
                                {"notes", report.notes}};
  if (!server.command.empty()) {
    out["server"] = {{"command", server.command}, {"args", server.args}};
  }
  return out;
}

void AddMcpCommands(CLI::App& app, Action* action) {
  auto* mcp = app.add_subcommand(
      "mcp", "Connect agents (Claude Code, Codex, Cursor) to abox through its MCP server");
  mcp->require_subcommand(1);

  auto install_flags = std::make_shared<Flags>();
  auto* install = mcp->add_subcommand(
      "install",
      "Register abox-mcp with an agent client and tell the agent how to use the sandbox");
  install->add_option("client", install_flags->client, "claude, codex or cursor")
      ->required()
      ->check(ClientValidator());
  AddScopeFlags(install, install_flags.get());
  install->add_flag("--allow-apply", install_flags->allow_apply,
                    "Yours, not the model's: let the agent apply sandbox changes to your files "
                    "(apply_changes)");
  install->add_flag("--allow-egress-changes", install_flags->allow_egress_changes,
                    "Yours, not the model's: let the agent change a sandbox's egress rules "
                    "itself instead of asking");
  install->add_flag("--allow-remove-any", install_flags->allow_remove_any,
                    "Yours, not the model's: let the agent remove sandboxes it did not create");
  install->add_option("--allow-secret", install_flags->allow_secrets,
                      "Yours, not the model's: let the agent give its sandboxes secret NAME (a "
                      "placeholder; the value stays on the host) (repeatable)");
  install->add_flag("--dry-run", install_flags->dry_run, "Show what would change; write nothing");
  install->add_flag("--json", install_flags->json, "Print the result as JSON");
  install->footer(absl::StrCat(kScopes, "\n", kPersonsFlags,
                               "\nExample: abox mcp install claude --allow-apply\n"));
  install->callback([=] { *action = [=] { return Install(*install_flags); }; });

  auto uninstall_flags = std::make_shared<Flags>();
  auto* uninstall = mcp->add_subcommand(
      "uninstall", "Remove what `abox mcp install` added for a client (and nothing else)");
  uninstall->add_option("client", uninstall_flags->client, "claude, codex or cursor")
      ->required()
      ->check(ClientValidator());
  AddScopeFlags(uninstall, uninstall_flags.get());
  uninstall->add_flag("--dry-run", uninstall_flags->dry_run,
                      "Show what would change; write nothing");
  uninstall->add_flag("--json", uninstall_flags->json, "Print the result as JSON");
  uninstall->footer(absl::StrCat(
      kScopes,
      "\nabox's server entry, table or section and its guidance file are removed; a file that "
      "did not exist\nbefore the first install and holds nothing else is deleted, and so are "
      "directories the install\ncreated once they are empty. Each changed file is backed up "
      "first ($ABOX_HOME/mcp-backups).\n"));
  uninstall->callback([=] { *action = [=] { return Uninstall(*uninstall_flags); }; });

  auto status_flags = std::make_shared<Flags>();
  auto* status = mcp->add_subcommand(
      "status",
      "Show, for each client and scope, whether abox is installed, with which flags, and "
      "whether its server command exists");
  status->add_option("--project", status_flags->project,
                     "The project directory (default: the current directory)");
  status->add_flag("--json", status_flags->json, "Print the rows as JSON");
  status->callback([=] { *action = [=] { return Status(*status_flags); }; });
  mcp->footer(kScopes);  // last: its subcommands would inherit it
}

}  // namespace abox::cli
