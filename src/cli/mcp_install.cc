#include "src/cli/mcp_install.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/cli/json_member_edit.h"
#include "src/cli/mcp_files.h"
#include "src/cli/mcp_guidance.h"
#include "src/cli/text_block_edit.h"
#include "src/cli/toml_check.h"

namespace abox::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

bool IsBlank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// abox-mcp's tools annotated destructive whose effects stay inside sandboxes.
constexpr std::array<absl::string_view, 7> kSandboxOnlyDestructiveTools = {
    "exec",         "exec_start",     "exec_signal",    "write_file",
    "sandbox_stop", "sandbox_remove", "sandbox_restore"};

std::string TomlBlock(const McpServerCommand& server) {
  std::vector<std::string> args;
  for (const std::string& arg : server.args) {
    args.push_back(TomlString(arg));
  }
  return absl::StrCat(
      kTomlLead, "; `abox mcp uninstall codex` removes it.\n", "[mcp_servers.abox]\n",
      "command = ", TomlString(server.command), "\n", "args = [", absl::StrJoin(args, ", "), "]\n",
      "# Starting may start aboxd first (Codex's default, 10 s, can be too short).\n",
      "startup_timeout_sec = 20\n",
      "# Tool calls answer within about 50 s (longer commands return a handle to poll), but\n",
      "# sandbox_create boots a VM and copies the workspace: allow a slow first boot.\n",
      "tool_timeout_sec = 120\n",
      "# These act only inside sandboxes: Codex runs them without asking each time (it asks\n",
      "# before tools annotated destructive). apply_changes, which writes the host, still asks.\n",
      absl::StrJoin(kSandboxOnlyDestructiveTools, "", [](std::string* out, absl::string_view tool) {
        absl::StrAppend(out, "tools.", tool, ".approval_mode = \"approve\"\n");
      }));
}

// Records of $ABOX_HOME/mcp-installs.json: what the first install found, per file.
struct Record {
  bool existed = false;
  bool had_servers = false;               // JSON: an mcpServers member
  std::vector<std::string> created_dirs;  // deepest first
  // An abox entry the person had before (JSON: its value; TOML: its lines), put back on uninstall.
  std::optional<std::string> prior_entry;
};

fs::path LedgerPath(const McpPaths& paths) { return paths.abox_home / "mcp-installs.json"; }

absl::StatusOr<ordered_json> ReadLedger(const McpPaths& paths) {
  fs::path path = LedgerPath(paths);
  ABOX_ASSIGN_OR_RETURN(McpFile current, ReadMcpFile(path));
  if (!current.exists) {
    return ordered_json{{"files", ordered_json::object()}};
  }
  ordered_json ledger = ordered_json::parse(current.text, nullptr, false);
  if (!ledger.is_object() || !ledger.contains("files") || !ledger["files"].is_object()) {
    return absl::DataLossError(absl::StrCat(path.string(),
                                            " is damaged; move it away (uninstall then leaves "
                                            "files abox created in place), then run this again"));
  }
  return ledger;
}

std::optional<Record> FindRecord(const ordered_json& ledger, const fs::path& path) {
  auto it = ledger["files"].find(path.string());
  if (it == ledger["files"].end() || !it->is_object()) {
    return std::nullopt;
  }
  Record record;
  auto flag = [&](const char* key) {
    auto v = it->find(key);
    return v == it->end() || !v->is_boolean() || v->get<bool>();
  };
  record.existed = flag("existed");
  record.had_servers = flag("had_servers");
  if (auto prior = it->find("prior_entry"); prior != it->end() && prior->is_string()) {
    record.prior_entry = prior->get<std::string>();
  }
  if (auto dirs = it->find("created_dirs"); dirs != it->end() && dirs->is_array()) {
    for (const ordered_json& dir : *dirs) {
      if (dir.is_string()) {
        record.created_dirs.push_back(dir.get<std::string>());
      }
    }
  }
  return record;
}

// The ancestors of `dir` (itself included) that do not exist yet, deepest first.
std::vector<std::string> MissingDirs(fs::path dir) {
  std::vector<std::string> missing;
  std::error_code ec;
  while (!dir.empty() && dir != dir.root_path() && !fs::exists(dir, ec)) {
    missing.push_back(dir.string());
    dir = dir.parent_path();
  }
  return missing;
}

// A file's planned change.
struct Planned {
  McpTarget target;
  McpFile current;
  std::optional<std::string> after;  // nullopt: remove the file
  FileAction action = FileAction::kUnchanged;
  bool had_servers = false;
  std::optional<std::string> prior_entry;  // install: an abox entry that was there already
};

void SetAction(Planned& p) {
  if (!p.after) {
    p.action = p.current.exists ? FileAction::kRemove : FileAction::kUnchanged;
  } else if (!p.current.exists) {
    p.action = FileAction::kCreate;
  } else {
    p.action = *p.after == p.current.text ? FileAction::kUnchanged : FileAction::kUpdate;
  }
}

absl::Status PlanInstall(const McpServerCommand& server, Planned& p) {
  const std::string file = p.target.path.string();
  const std::string& before = p.current.text;
  switch (p.target.kind) {
    case EditKind::kJson: {
      ABOX_ASSIGN_OR_RETURN(ordered_json config, ParseUserJson(file, before));
      p.had_servers = config.contains("mcpServers");
      ordered_json existing = AboxServerEntry(config);
      if (!existing.is_null()) {
        p.prior_entry = existing.dump();
      }
      ordered_json entry = existing.is_object() ? existing : ordered_json::object();
      entry["command"] = server.command;
      entry["args"] = server.args;
      if (!entry.contains("env")) {
        entry["env"] = ordered_json::object();
      }
      if (entry == existing) {
        p.after = before;
      } else {
        ABOX_ASSIGN_OR_RETURN(p.after, SetJsonMember(file, before, JsonPath(), entry));
      }
      break;
    }
    case EditKind::kToml: {
      ABOX_RETURN_IF_ERROR(CheckToml(file, before));
      std::optional<LineSpan> span = FindTomlTable(before, TomlTable(), kTomlLead);
      if (span) {
        p.prior_entry = before.substr(span->begin, span->end - span->begin);
      }
      p.after = SetBlock(before, span, TomlBlock(server));
      absl::StatusOr<std::optional<TomlServer>> read = ReadTomlServer(file, *p.after, "abox");
      if (!read.ok() || !read->has_value() || (*read)->command != server.command) {
        return absl::FailedPreconditionError(absl::StrCat(
            "adding abox's [mcp_servers.abox] table to ", file,
            " would not give a valid config (is mcp_servers.abox defined another way, as an "
            "inline table or with dotted keys?); remove that definition, then run this again. "
            "Nothing was written",
            read.ok() ? "" : absl::StrCat(" (", read.status().message(), ")")));
      }
      break;
    }
    case EditKind::kSection: {
      ABOX_ASSIGN_OR_RETURN(std::optional<LineSpan> span,
                            FindMarkedSection(file, before, kSectionBegin, kSectionEnd));
      p.after = SetBlock(before, span, p.target.content);
      break;
    }
    case EditKind::kOwnedFile:
      if (p.current.exists && !absl::StrContains(before, kWrittenByAbox)) {
        return absl::FailedPreconditionError(
            absl::StrCat(file,
                         " exists and was not written by abox; move it away, then run this "
                         "again. Nothing was written"));
      }
      p.after = p.target.content;
      break;
  }
  return absl::OkStatus();
}

absl::Status PlanUninstall(const std::optional<Record>& record, Planned& p) {
  const std::string file = p.target.path.string();
  const std::string& before = p.current.text;
  if (!p.current.exists) {
    p.after = std::nullopt;  // nothing to remove (SetAction: unchanged)
    return absl::OkStatus();
  }
  p.after = before;
  bool created = record && !record->existed;
  switch (p.target.kind) {
    case EditKind::kJson: {
      if (record && record->prior_entry) {
        ordered_json prior = ordered_json::parse(*record->prior_entry, nullptr, false);
        if (!prior.is_discarded()) {
          ABOX_ASSIGN_OR_RETURN(p.after, SetJsonMember(file, before, JsonPath(), prior));
          break;
        }
      }
      ABOX_ASSIGN_OR_RETURN(
          p.after, RemoveJsonMember(file, before, JsonPath(), record && !record->had_servers));
      ABOX_ASSIGN_OR_RETURN(ordered_json left, ParseUserJson(file, *p.after));
      bool only_servers = left.size() == 1 && left.contains("mcpServers") &&
                          left["mcpServers"].is_object() && left["mcpServers"].empty();
      if (created && (left.empty() || only_servers)) {
        p.after = std::nullopt;
      }
      break;
    }
    case EditKind::kToml:
    case EditKind::kSection: {
      std::optional<LineSpan> span;
      if (p.target.kind == EditKind::kToml) {
        span = FindTomlTable(before, TomlTable(), kTomlLead);
      } else {
        ABOX_ASSIGN_OR_RETURN(span, FindMarkedSection(file, before, kSectionBegin, kSectionEnd));
      }
      if (span && p.target.kind == EditKind::kToml && record && record->prior_entry) {
        p.after = SetBlock(before, span, *record->prior_entry);
      } else if (span) {
        p.after = RemoveBlock(before, *span);
      }
      if (created && IsBlank(*p.after)) {
        p.after = std::nullopt;
      }
      break;
    }
    case EditKind::kOwnedFile:
      if (absl::StrContains(before, kWrittenByAbox)) {
        p.after = std::nullopt;
      }
      break;
  }
  return absl::OkStatus();
}

// Makes $ABOX_HOME/mcp-backups/<time>-<client>-<action>[-N].
absl::StatusOr<fs::path> MakeBackupDir(const McpPaths& paths, McpClient client, const char* action,
                                       absl::Time now) {
  fs::path root = paths.abox_home / "mcp-backups";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", root.string(), ": ", ec.message(), "; check ABOX_HOME"));
  }
  std::string name = absl::StrCat(absl::FormatTime("%Y%m%dT%H%M%SZ", now, absl::UTCTimeZone()), "-",
                                  ClientName(client), "-", action);
  for (int n = 1;; ++n) {
    fs::path dir = root / (n == 1 ? name : absl::StrCat(name, "-", n));
    if (::mkdir(dir.c_str(), 0700) == 0) {
      return dir;
    }
    if (errno != EEXIST) {
      return base::ErrnoError(absl::StrCat("mkdir(", dir.string(), ")"));
    }
  }
}

// Backs up, updates the ledger, then writes: the part of install and uninstall that changes
// files.
absl::Status Commit(const McpPaths& paths, const char* action, absl::Time now,
                    std::vector<Planned>& plan, ordered_json& ledger, McpReport& report) {
  ABOX_ASSIGN_OR_RETURN(fs::path backup_dir, MakeBackupDir(paths, report.client, action, now));
  report.backup_dir = backup_dir.string();
  ordered_json manifest = {{"client", ClientName(report.client)},
                           {"scope", ScopeName(report.scope)},
                           {"action", action},
                           {"time", absl::FormatTime(absl::RFC3339_sec, now, absl::UTCTimeZone())},
                           {"files", ordered_json::array()}};
  for (size_t i = 0; i < plan.size(); ++i) {
    Planned& p = plan[i];
    if (p.action == FileAction::kUnchanged) {
      continue;
    }
    ordered_json entry = {{"path", p.target.path.string()},
                          {"existed", p.current.exists},
                          {"action", FileActionName(p.action)}};
    if (p.current.exists) {
      fs::path copy = backup_dir / absl::StrCat(i + 1, "-", p.target.path.filename().string());
      ABOX_RETURN_IF_ERROR(base::WriteFileAtomic(copy.string(), p.current.text, 0600));
      entry["backup"] = copy.filename().string();
      entry["mode"] = p.current.mode;
      report.files[i].backup = copy.string();
    }
    manifest["files"].push_back(std::move(entry));
  }
  ABOX_RETURN_IF_ERROR(
      base::WriteFileAtomic((backup_dir / "manifest.json").string(), manifest.dump(2) + "\n"));
  ABOX_RETURN_IF_ERROR(
      base::WriteFileAtomic(LedgerPath(paths).string(), ledger.dump(2) + "\n", 0600));

  for (const Planned& p : plan) {
    if (p.action == FileAction::kUnchanged) {
      continue;
    }
    const fs::path& path = p.current.write_path;
    absl::Status status;
    if (p.after) {
      std::error_code ec;
      fs::create_directories(path.parent_path(), ec);
      if (ec) {
        status = absl::FailedPreconditionError(
            absl::StrCat("cannot create ", path.parent_path().string(), ": ", ec.message()));
      } else {
        status = base::WriteFileAtomic(path.string(), *p.after, p.current.mode);
      }
    } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      status = base::ErrnoError(absl::StrCat("unlink(", path.string(), ")"));
    }
    if (!status.ok()) {
      return base::Annotate(status,
                            absl::StrCat("writing ", path.string(), " (the originals are in ",
                                         backup_dir.string(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Planned>> ReadPlan(const McpPaths& paths, McpClient client,
                                              McpScope scope) {
  std::vector<Planned> plan;
  for (McpTarget& target : McpTargets(paths, client, scope)) {
    Planned p{.target = std::move(target)};
    ABOX_ASSIGN_OR_RETURN(p.current, ReadMcpFile(p.target.path));
    if (!p.current.exists && p.target.path.filename() == ".claude.json") {
      p.current.mode = 0600;  // Claude Code keeps its state and account there
    }
    plan.push_back(std::move(p));
  }
  return plan;
}

McpReport StartReport(McpClient client, McpScope scope, bool dry_run,
                      const std::vector<Planned>& plan) {
  McpReport report{.client = client, .scope = scope, .dry_run = dry_run};
  for (const Planned& p : plan) {
    FileChange change{.path = p.target.path.string(), .role = p.target.role, .action = p.action};
    if (dry_run && p.action != FileAction::kUnchanged) {
      change.diff = LineDiff(p.current.exists ? p.current.text : "", p.after.value_or(""));
    }
    report.files.push_back(std::move(change));
  }
  return report;
}

}  // namespace

const char* ClientName(McpClient client) {
  switch (client) {
    case McpClient::kClaude:
      return "claude";
    case McpClient::kCodex:
      return "codex";
    case McpClient::kCursor:
      return "cursor";
  }
  return "?";
}

const char* ScopeName(McpScope scope) { return scope == McpScope::kProject ? "project" : "global"; }

const char* FileActionName(FileAction action) {
  switch (action) {
    case FileAction::kUnchanged:
      return "unchanged";
    case FileAction::kCreate:
      return "create";
    case FileAction::kUpdate:
      return "update";
    case FileAction::kRemove:
      return "remove";
  }
  return "?";
}

bool McpReport::changed() const {
  for (const FileChange& f : files) {
    if (f.action != FileAction::kUnchanged) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<McpReport> InstallMcp(const McpPaths& paths, McpClient client, McpScope scope,
                                     const McpServerCommand& server, bool dry_run, absl::Time now) {
  ABOX_ASSIGN_OR_RETURN(std::vector<Planned> plan, ReadPlan(paths, client, scope));
  for (Planned& p : plan) {
    ABOX_RETURN_IF_ERROR(PlanInstall(server, p));
    SetAction(p);
  }
  McpReport report = StartReport(client, scope, dry_run, plan);
  if (!report.changed() || dry_run) {
    return report;
  }
  ABOX_ASSIGN_OR_RETURN(ordered_json ledger, ReadLedger(paths));
  for (const Planned& p : plan) {
    if (p.action == FileAction::kUnchanged || FindRecord(ledger, p.target.path)) {
      continue;
    }
    ledger["files"][p.target.path.string()] = {
        {"existed", p.current.exists},
        {"had_servers", p.had_servers},
        {"prior_entry", p.prior_entry ? ordered_json(*p.prior_entry) : ordered_json(nullptr)},
        {"created_dirs", MissingDirs(p.current.write_path.parent_path())}};
  }
  ABOX_RETURN_IF_ERROR(Commit(paths, "install", now, plan, ledger, report));
  return report;
}

absl::StatusOr<McpReport> UninstallMcp(const McpPaths& paths, McpClient client, McpScope scope,
                                       bool dry_run, absl::Time now) {
  ABOX_ASSIGN_OR_RETURN(std::vector<Planned> plan, ReadPlan(paths, client, scope));
  ABOX_ASSIGN_OR_RETURN(ordered_json ledger, ReadLedger(paths));
  std::vector<std::string> created_dirs;
  for (Planned& p : plan) {
    std::optional<Record> record = FindRecord(ledger, p.target.path);
    ABOX_RETURN_IF_ERROR(PlanUninstall(record, p));
    SetAction(p);
    if (record) {
      created_dirs.insert(created_dirs.end(), record->created_dirs.begin(),
                          record->created_dirs.end());
      ledger["files"].erase(p.target.path.string());
    }
  }
  McpReport report = StartReport(client, scope, dry_run, plan);
  if (!report.changed() || dry_run) {
    return report;
  }
  ABOX_RETURN_IF_ERROR(Commit(paths, "uninstall", now, plan, ledger, report));
  // Deepest first: a directory's subdirectories go before it.
  std::sort(created_dirs.begin(), created_dirs.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& dir : created_dirs) {
    if (::rmdir(dir.c_str()) == 0) {
      report.notes.push_back(absl::StrCat("removed the empty directory ", dir));
    }
  }
  return report;
}

}  // namespace abox::cli
