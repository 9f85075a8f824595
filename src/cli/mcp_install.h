// `abox mcp install|uninstall|status`, without the command line: registers abox-mcp (the MCP
// server) with an agent client and gives the agent guidance on using it.
//
//   client  scope    config (the "abox" server entry)        guidance
//   claude  project  DIR/.mcp.json                           DIR/.claude/skills/abox/SKILL.md
//   claude  global   ~/.claude.json (top-level mcpServers)   ~/.claude/skills/abox/SKILL.md
//   codex   project  DIR/.codex/config.toml                  DIR/AGENTS.md (marked section)
//   codex   global   $CODEX_HOME/config.toml                 $CODEX_HOME/AGENTS.md
//   cursor  project  DIR/.cursor/mcp.json                    DIR/.cursor/rules/abox.mdc
//   cursor  global   ~/.cursor/mcp.json                      (none: user rules live in Cursor)
//
// The person's files are edited as text (json_member_edit.h, text_block_edit.h): only abox's
// entry, table or section changes. Each file is backed up before it changes
// ($ABOX_HOME/mcp-backups/<time>-<client>-<action>/: the original bytes and manifest.json), and
// written atomically with its mode kept. $ABOX_HOME/mcp-installs.json records, per file, what
// the first install found (did the file exist, did it have an mcpServers object, which
// directories it created), so that uninstall removes exactly what install added. Pure of the
// environment: every location comes in McpPaths, the time as an argument.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace abox::cli {

enum class McpClient { kClaude, kCodex, kCursor };
enum class McpScope { kProject, kGlobal };

[[nodiscard]] const char* ClientName(McpClient client);
[[nodiscard]] const char* ScopeName(McpScope scope);

// Where the clients' files and abox's records are. Tests pass scratch directories.
struct McpPaths {
  std::filesystem::path home;        // the person's home directory
  std::filesystem::path codex_home;  // $CODEX_HOME, else home/.codex
  std::filesystem::path abox_home;   // $ABOX_HOME: backups and mcp-installs.json
  std::filesystem::path project;     // the project directory (absolute)
};

// The server the clients start: the absolute path of abox-mcp and the person's flags.
struct McpServerCommand {
  std::string command;
  std::vector<std::string> args;
};

enum class FileAction { kUnchanged, kCreate, kUpdate, kRemove };
[[nodiscard]] const char* FileActionName(FileAction action);

struct FileChange {
  std::string path;
  std::string role;  // "config", "skill", "agents", "rule"
  FileAction action = FileAction::kUnchanged;
  std::string backup;  // the copy of the original bytes, when the file existed and changed
  // In a dry run: the lines that change, "-" before and "+" after, under "@@ line N".
  std::string diff;
};

struct McpReport {
  McpClient client = McpClient::kClaude;
  McpScope scope = McpScope::kProject;
  bool dry_run = false;
  std::vector<FileChange> files;
  std::string backup_dir;  // empty when nothing changed (or a dry run)
  std::vector<std::string> notes;

  // Whether any file changed (or, in a dry run, would change).
  [[nodiscard]] bool changed() const;
};

// Adds (or updates) abox's server entry and guidance for `client` in `scope`. Nothing is
// written when nothing would change (a re-install), in a dry run, or when any file is refused
// (malformed, has comments, a guidance file abox did not write): then the error names the file
// and says what to do.
[[nodiscard]] absl::StatusOr<McpReport> InstallMcp(const McpPaths& paths, McpClient client,
                                                   McpScope scope, const McpServerCommand& server,
                                                   bool dry_run, absl::Time now);

// Removes what InstallMcp added: the entry, table or section, and the guidance file; a file that
// did not exist before the first install and holds nothing else is removed, and so are the
// directories the install created once they are empty.
[[nodiscard]] absl::StatusOr<McpReport> UninstallMcp(const McpPaths& paths, McpClient client,
                                                     McpScope scope, bool dry_run, absl::Time now);

}  // namespace abox::cli
