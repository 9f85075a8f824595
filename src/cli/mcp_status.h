// `abox mcp status`: for each client and scope, whether abox's server entry is there, with which
// flags, and whether its command and the agent's guidance exist.
#pragma once

#include <string>
#include <vector>

#include "src/cli/mcp_install.h"

namespace abox::cli {

// One client in one scope, as `abox mcp status` shows it.
struct McpStatusRow {
  McpClient client = McpClient::kClaude;
  McpScope scope = McpScope::kProject;
  std::string config;  // the config file
  bool installed = false;
  std::string command;
  std::vector<std::string> args;
  bool command_executable = false;
  std::string guidance;  // the guidance file, "" when the scope has none
  bool guidance_present = false;
  std::string error;  // why the config could not be read, if it could not
};

// Every client in both scopes.
[[nodiscard]] std::vector<McpStatusRow> McpStatus(const McpPaths& paths);

}  // namespace abox::cli
