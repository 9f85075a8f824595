// The files `abox mcp` edits for each client and scope (the table in mcp_install.h), and how it
// reads them: shared by install/uninstall (mcp_install.cc) and status (mcp_status.cc).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "src/cli/mcp_install.h"

namespace abox::cli {

// How abox edits a file: a JSON member (mcpServers.abox), a TOML table ([mcp_servers.abox]), a
// marked section (AGENTS.md), or a whole file abox owns (a skill, a rule).
enum class EditKind { kJson, kToml, kSection, kOwnedFile };

// One file abox edits for a client in a scope.
struct McpTarget {
  std::filesystem::path path;
  EditKind kind = EditKind::kJson;
  std::string role;     // "config", "skill", "agents", "rule"
  std::string content;  // the guidance file or section
};

// The JSON member and the TOML table abox's server entry lives at.
[[nodiscard]] const std::vector<std::string>& JsonPath();
[[nodiscard]] const std::vector<std::string>& TomlTable();
// The comment line abox writes above its TOML table (and recognizes as part of it).
inline constexpr char kTomlLead[] = "# Written by `abox mcp install codex`";

// The config file first, then the guidance file if the scope has one.
[[nodiscard]] std::vector<McpTarget> McpTargets(const McpPaths& paths, McpClient client,
                                                McpScope scope);

// A file as it is now.
struct McpFile {
  bool exists = false;
  std::string text;
  int mode = 0644;
  std::filesystem::path write_path;  // where to write: the file, or what its symlink points to
};

// Reads `path`; a missing file is `exists = false`. Refuses what is not a regular file.
[[nodiscard]] absl::StatusOr<McpFile> ReadMcpFile(const std::filesystem::path& path);

// The "abox" member of a JSON config's mcpServers, or null.
[[nodiscard]] nlohmann::ordered_json AboxServerEntry(const nlohmann::ordered_json& config);

}  // namespace abox::cli
