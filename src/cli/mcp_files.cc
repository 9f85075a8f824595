#include "src/cli/mcp_files.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/cli/mcp_guidance.h"

namespace abox::cli {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const std::vector<std::string>& JsonPath() {
  static const auto* path = new std::vector<std::string>{"mcpServers", "abox"};
  return *path;
}
const std::vector<std::string>& TomlTable() {
  static const auto* table = new std::vector<std::string>{"mcp_servers", "abox"};
  return *table;
}

std::vector<McpTarget> McpTargets(const McpPaths& paths, McpClient client, McpScope scope) {
  bool project = scope == McpScope::kProject;
  const fs::path& base = project ? paths.project : paths.home;
  switch (client) {
    case McpClient::kClaude:
      return {{project ? base / ".mcp.json" : base / ".claude.json", EditKind::kJson, "config"},
              {base / ".claude" / "skills" / "abox" / "SKILL.md", EditKind::kOwnedFile, "skill",
               ClaudeSkill()}};
    case McpClient::kCodex: {
      fs::path dir = project ? paths.project / ".codex" : paths.codex_home;
      return {{dir / "config.toml", EditKind::kToml, "config"},
              {(project ? paths.project : paths.codex_home) / "AGENTS.md", EditKind::kSection,
               "agents", AgentsSection()}};
    }
    case McpClient::kCursor: {
      std::vector<McpTarget> targets = {{base / ".cursor" / "mcp.json", EditKind::kJson, "config"}};
      if (project) {
        targets.push_back(
            {base / ".cursor" / "rules" / "abox.mdc", EditKind::kOwnedFile, "rule", CursorRule()});
      }
      return targets;
    }
  }
  return {};
}

absl::StatusOr<McpFile> ReadMcpFile(const fs::path& path) {
  McpFile current{.write_path = path};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return current;
    }
    return base::ErrnoError(absl::StrCat("stat(", path.string(), ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path.string(), " is not a regular file; move it away, then run this again"));
  }
  std::error_code ec;
  if (fs::is_symlink(path, ec)) {
    current.write_path = fs::canonical(path, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot resolve the symlink ", path.string(), ": ", ec.message()));
    }
  }
  ABOX_ASSIGN_OR_RETURN(current.text, base::ReadFile(path.string()));
  current.exists = true;
  current.mode = static_cast<int>(st.st_mode & 07777);
  return current;
}

ordered_json AboxServerEntry(const ordered_json& config) {
  auto servers = config.find("mcpServers");
  if (servers == config.end() || !servers->is_object()) {
    return nullptr;
  }
  auto entry = servers->find("abox");
  return entry == servers->end() ? ordered_json(nullptr) : *entry;
}

}  // namespace abox::cli
