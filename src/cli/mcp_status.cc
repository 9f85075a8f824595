#include "src/cli/mcp_status.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "src/cli/json_member_edit.h"
#include "src/cli/mcp_files.h"
#include "src/cli/mcp_guidance.h"
#include "src/cli/toml_check.h"

namespace abox::cli {

using nlohmann::ordered_json;

std::vector<McpStatusRow> McpStatus(const McpPaths& paths) {
  std::vector<McpStatusRow> rows;
  for (McpClient client : {McpClient::kClaude, McpClient::kCodex, McpClient::kCursor}) {
    for (McpScope scope : {McpScope::kProject, McpScope::kGlobal}) {
      std::vector<McpTarget> targets = McpTargets(paths, client, scope);
      McpStatusRow row{.client = client, .scope = scope, .config = targets[0].path.string()};
      absl::StatusOr<McpFile> current = ReadMcpFile(targets[0].path);
      if (!current.ok()) {
        row.error = std::string(current.status().message());
      } else if (current->exists && targets[0].kind == EditKind::kJson) {
        absl::StatusOr<ordered_json> config = ParseUserJson(row.config, current->text);
        ordered_json entry = config.ok() ? AboxServerEntry(*config) : ordered_json(nullptr);
        if (!config.ok()) {
          row.error = std::string(config.status().message());
        } else if (entry.is_object()) {
          row.installed = true;
          if (auto c = entry.find("command"); c != entry.end() && c->is_string()) {
            row.command = c->get<std::string>();
          }
          if (auto a = entry.find("args"); a != entry.end() && a->is_array()) {
            for (const ordered_json& arg : *a) {
              row.args.push_back(arg.is_string() ? arg.get<std::string>() : arg.dump());
            }
          }
        }
      } else if (current->exists) {
        absl::StatusOr<std::optional<TomlServer>> server =
            ReadTomlServer(row.config, current->text, "abox");
        if (!server.ok()) {
          row.error = std::string(server.status().message());
        } else if (server->has_value()) {
          row.installed = true;
          row.command = (*server)->command;
          row.args = (*server)->args;
        }
      }
      row.command_executable = !row.command.empty() && ::access(row.command.c_str(), X_OK) == 0;
      if (targets.size() > 1) {
        row.guidance = targets[1].path.string();
        absl::StatusOr<McpFile> guidance = ReadMcpFile(targets[1].path);
        row.guidance_present =
            guidance.ok() && guidance->exists &&
            absl::StrContains(guidance->text, targets[1].kind == EditKind::kSection
                                                  ? kSectionBegin
                                                  : kWrittenByAbox);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace abox::cli
